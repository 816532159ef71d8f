"""Benchmark evaluation: protocols, scoring of ink files, tables and plots (paper Sec. 4.1)."""
