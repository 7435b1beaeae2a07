from .speculation import SpeculationSensor

__all__ = ["SpeculationSensor"]
