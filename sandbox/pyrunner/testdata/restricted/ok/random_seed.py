import random
random.seed(42)
print(random.randint(1, 100), random.random() < 1, random.choice("abc"))
rng = random.Random(7)
xs = list(range(10))
rng.shuffle(xs)
print(xs, rng.sample(range(100), 3), round(rng.uniform(1, 2), 6))
