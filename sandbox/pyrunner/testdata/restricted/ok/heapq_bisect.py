import heapq
import bisect
h = [5, 1, 8, 3]
heapq.heapify(h)
heapq.heappush(h, 0)
print([heapq.heappop(h) for _ in range(3)], heapq.nlargest(2, [4, 9, 2]), heapq.nsmallest(1, [4, 9, 2]))
a = [1, 3, 5, 7]
bisect.insort(a, 4)
print(a, bisect.bisect_left(a, 5), bisect.bisect(a, 10))
