import datetime
d = datetime.date(2024, 2, 28)
print(d + datetime.timedelta(days=2), d.isoformat(), d.weekday(), d.strftime("%d/%m/%Y"))
dt = datetime.datetime(2024, 1, 1, 12, 30, tzinfo=datetime.timezone.utc)
print(dt.isoformat(), (dt + datetime.timedelta(hours=13)).day, dt.timestamp(), datetime.datetime.fromisoformat("2024-05-06T07:08:09").hour)
print(datetime.datetime.strptime("2024-03-04", "%Y-%m-%d").date(), (datetime.date(2024, 12, 25) - d).days)
