"""Kernel ridge with Nystroem centers, solved by Falkon out of core, and its cross-validated searches."""
