"""Imported by the verify forkserver: load math-verify and sympy and run one check, so every
worker forked from it starts warm (replacing a killed worker then takes milliseconds)."""

from pipeline.verify.grader import grade

grade("1", "\\frac{2}{2}")
