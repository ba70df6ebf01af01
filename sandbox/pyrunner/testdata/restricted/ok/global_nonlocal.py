total = 0
def add(n):
    global total
    total += n
def outer():
    value = "a"
    def inner():
        nonlocal value
        value += "b"
    inner()
    inner()
    return value
add(3)
add(4)
print(total, outer())
