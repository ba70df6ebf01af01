import abc
from typing import List, Optional, Dict
class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self) -> float:
        ...
class Sq(Shape):
    def __init__(self, s: float) -> None:
        self.s = s
    def area(self) -> float:
        return self.s ** 2
def total(shapes: List[Shape], scale: Optional[float] = None) -> Dict[str, float]:
    return {"sum": sum(s.area() for s in shapes) * (scale or 1)}
try:
    Shape()
except TypeError:
    print("abstract")
print(total([Sq(2), Sq(3)]), isinstance(Sq(1), Shape))
