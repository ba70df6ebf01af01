class Animal:
    def __init__(self, name):
        self.name = name
    def speak(self):
        return "..."
    def describe(self):
        return f"{self.name} says {self.speak()}"
class Dog(Animal):
    def __init__(self, name, breed):
        super().__init__(name)
        self.breed = breed
    def speak(self):
        return "woof"
class Puppy(Dog):
    def speak(self):
        return super().speak() + "!"
p = Puppy("rex", "lab")
print(p.describe(), p.breed, isinstance(p, Animal), issubclass(Puppy, Dog), type(p).__name__, p.__class__.__name__)
print([c.__name__ for c in (Animal, Dog, Puppy)], Puppy.__init__ is Dog.__init__)
