import math
import cmath
print(math.sqrt(16), math.floor(2.7), math.ceil(2.1), math.pi, math.gcd(12, 18), math.factorial(6), math.isclose(0.1 + 0.2, 0.3))
print(round(math.log(math.e), 3), math.hypot(3, 4), math.comb(5, 2), math.inf > 1e308, math.isnan(float("nan")), cmath.sqrt(-1))
