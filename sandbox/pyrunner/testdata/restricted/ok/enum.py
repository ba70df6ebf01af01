import enum
class Color(enum.Enum):
    RED = 1
    GREEN = 2
class Perm(enum.IntFlag):
    R = 4
    W = 2
print(Color.RED, Color(2).name, Color["GREEN"].value, [c.name for c in Color], Color.RED is Color.RED)
print(int(Perm.R | Perm.W), Perm.R in (Perm.R | Perm.W), len(Color))
class Shape(enum.Enum):
    CIRCLE = enum.auto()
    SQUARE = enum.auto()
    def label(self):
        return self.name.lower()
print(Shape.SQUARE.value, Shape.CIRCLE.label())
