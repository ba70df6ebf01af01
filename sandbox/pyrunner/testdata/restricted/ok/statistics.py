import statistics
data = [2, 4, 4, 4, 5, 5, 7, 9]
print(statistics.mean(data), statistics.median(data), statistics.mode(data), statistics.pstdev(data), round(statistics.stdev(data), 4))
print(statistics.median_low([1, 3, 5, 7]), statistics.quantiles(data, n=4), statistics.fmean([1.5, 2.5]))
