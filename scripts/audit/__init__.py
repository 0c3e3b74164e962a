"""`make audit`: Lighthouse on every lesson page beside a bare mkdocs-material page."""
