"""Bands live in :mod:`pipeline.bands` (declared once); this name is kept for existing imports."""

from pipeline.bands import BANDS, assign_band, band_confidence, band_ranges

__all__ = ["BANDS", "assign_band", "band_confidence", "band_ranges"]
