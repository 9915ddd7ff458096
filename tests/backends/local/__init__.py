"""Unit tests of the local backend: its records, limits and damaged files, without Paddle processes."""
