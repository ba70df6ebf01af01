from decimal import Decimal, getcontext, ROUND_HALF_UP
from fractions import Fraction
getcontext().prec = 10
print(Decimal("0.1") + Decimal("0.2"), Decimal(1) / Decimal(7), Decimal("2.675").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
f = Fraction(1, 3) + Fraction(1, 6)
print(f, f.numerator, f.denominator, float(f), Fraction("3/4") * 2, Fraction(0.5))
