"""Measuring collections: streaming inference, bounded sketches, time profiles, drift, references."""
