"""What every learner shares: one-pass statistics, penalized solves, targets, the streamed pass and predict."""
