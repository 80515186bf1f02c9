"""mongopat: measure MongoDB collections, recommend design patterns, migrate safely."""

__version__ = "0.1.0"
