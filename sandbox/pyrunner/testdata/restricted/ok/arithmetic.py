a, b = 7, 3
print(a + b, a - b, a * b, a / b, a // b, a % b, a ** b, -a, divmod(a, b), pow(2, 10, 7), abs(-4), round(2.675, 2))
x = 10
x += 5
x *= 2
x -= 1
x //= 3
print(x, 0.1 + 0.2 == 0.3, 1e3, 2 ** 100)
