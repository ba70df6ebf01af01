from dataclasses import dataclass, field, asdict, replace
@dataclass(order=True)
class Point:
    x: int
    y: int = 0
    tags: list = field(default_factory=list)
    def norm2(self):
        return self.x ** 2 + self.y ** 2
@dataclass(frozen=True)
class Frozen:
    a: int
    def __post_init__(self):
        if self.a < 0:
            raise ValueError("negative")
p = Point(3, 4)
print(p, p.norm2(), asdict(p), replace(p, y=1), Point(1) < Point(2), Frozen(1))
try:
    Frozen(1).a = 2
except Exception as e:
    print(type(e).__name__)
try:
    Frozen(-1)
except ValueError as e:
    print(e)
