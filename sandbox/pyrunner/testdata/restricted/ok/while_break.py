n, steps = 27, 0
while n != 1:
    n = n // 2 if n % 2 == 0 else 3 * n + 1
    steps += 1
    if steps > 1000:
        break
else:
    print("never")
for i in range(10):
    if i == 2:
        continue
    if i == 5:
        break
    print(i, end=" ")
print()
print(steps)
