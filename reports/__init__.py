"""Reports: PySpark turns conformance results and load logs into index.html, summary.md and tables."""
