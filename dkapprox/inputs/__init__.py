"""Every input through one door: the form told apart, validated, frames read and written back, rows read."""
