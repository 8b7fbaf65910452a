"""umstudy's ReFrame library: systems and claims as data, local detection, and the
shared pieces of every check (build fixture, JSON-lines parsing, references)."""
