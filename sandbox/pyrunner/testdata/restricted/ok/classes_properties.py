class Account:
    rate = 0.1
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
    @property
    def interest(self):
        return self.balance * self.rate
    @interest.setter
    def interest(self, v):
        self.balance = v / self.rate
    def deposit(self, amount):
        self.balance += amount
        return self
    def __repr__(self):
        return f"Account({self.owner!r}, {self.balance})"
    def __eq__(self, other):
        return isinstance(other, Account) and self.balance == other.balance
    def __hash__(self):
        return hash(self.balance)
a = Account("ann").deposit(100).deposit(50)
print(a, a.interest, a == Account("bob", 150))
a.interest = 30
print(a.balance, repr(a), str(a), Account.rate, len({a, Account("x", 300)}))
