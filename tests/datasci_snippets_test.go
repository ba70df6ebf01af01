package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// A datasci snippet: an ordinary piece of agent data code, run as is
// under the datasci policy, Python layer and all.
type snippet struct {
	name string
	code string
	want string // printed by the snippet when it worked
}

// pngCheck prints "png" when the file at the path in the variable p starts
// with the PNG signature.
const pngCheck = "\nwith open(p, 'rb') as f:\n    print('png' if f.read(8) == b'\\x89PNG\\r\\n\\x1a\\n' else 'not png')\n"

var datasciSnippets = []snippet{
	{name: "excel round trip", want: "excel 3 True", code: `
import pandas as pd
df = pd.DataFrame({"name": ["a", "b", "c"], "qty": [1, 2, 3], "price": [1.5, 2.0, 2.5]})
df.to_excel("/workspace/sales.xlsx", index=False, sheet_name="Q1")
back = pd.read_excel("/workspace/sales.xlsx", sheet_name="Q1")
print("excel", len(back), back.equals(df))
`},
	{name: "openpyxl workbook", want: "openpyxl =SUM(A1:A3) 6", code: `
from openpyxl import Workbook, load_workbook
wb = Workbook()
ws = wb.active
for i in (1, 2, 3):
    ws.append([i])
ws["B1"] = "=SUM(A1:A3)"
wb.save("/workspace/book.xlsx")
ws2 = load_workbook("/workspace/book.xlsx").active
print("openpyxl", ws2["B1"].value, sum(c.value for c in ws2["A"]))
`},
	{name: "csv round trip", want: "csv True", code: `
import pandas as pd
df = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3.5, 19.25]})
df.to_csv("/workspace/t.csv", index=False)
print("csv", pd.read_csv("/workspace/t.csv").equals(df))
`},
	{name: "parquet round trip", want: "parquet True int64", code: `
import pandas as pd
df = pd.DataFrame({"id": range(1000), "v": [i * 0.5 for i in range(1000)]})
df.to_parquet("/workspace/t.parquet", engine="pyarrow")
back = pd.read_parquet("/workspace/t.parquet")
print("parquet", back.equals(df), back["id"].dtype)
`},
	{name: "pyarrow table", want: "arrow 3 6", code: `
import pyarrow as pa
import pyarrow.compute as pc
t = pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})
print("arrow", t.num_rows, pc.sum(t["x"]).as_py())
`},
	{name: "groupby pivot merge", want: "groupby 30 2 4", code: `
import pandas as pd
sales = pd.DataFrame({"region": ["n", "n", "s", "s"], "month": [1, 2, 1, 2], "amount": [10, 20, 5, 7]})
regions = pd.DataFrame({"region": ["n", "s"], "manager": ["Ann", "Bo"]})
by = sales.groupby("region")["amount"].sum()
pv = sales.pivot_table(index="region", columns="month", values="amount")
m = sales.merge(regions, on="region")
print("groupby", by["n"], pv.shape[1], len(m))
`},
	{name: "describe", want: "describe 5.0 3.0", code: `
import pandas as pd
d = pd.Series([1, 2, 3, 4, 5]).describe()
print("describe", d["count"], d["mean"])
`},
	{name: "datetime resample", want: "resample 4 24", code: `
import pandas as pd
idx = pd.date_range("2026-01-01", periods=96, freq="h", tz="Europe/Paris")
s = pd.Series(1, index=idx)
daily = s.resample("D").sum()
print("resample", len(daily), daily.iloc[0])
`},
	{name: "numpy linalg", want: "linalg [1. 2.] True", code: `
import numpy as np
a = np.array([[3.0, 1.0], [1.0, 2.0]])
x = np.linalg.solve(a, np.array([5.0, 5.0]))
w, v = np.linalg.eig(a)
print("linalg", np.round(x, 6), bool(np.allclose(a @ v, v * w)))
`},
	{name: "scipy ttest", want: "ttest True", code: `
import numpy as np
from scipy import stats
rng = np.random.default_rng(0)
a, b = rng.normal(0, 1, 200), rng.normal(1, 1, 200)
r = stats.ttest_ind(a, b)
print("ttest", bool(r.pvalue < 1e-6))
`},
	{name: "scipy optimize", want: "optimize [1. 1.]", code: `
import numpy as np
from scipy.optimize import minimize, rosen
r = minimize(rosen, np.array([1.3, 0.7]), method="BFGS")
print("optimize", np.round(r.x, 3))
`},
	{name: "scipy integrate interpolate", want: "quad 0.333333 2.5", code: `
from scipy.integrate import quad
from scipy.interpolate import interp1d
v, _ = quad(lambda x: x * x, 0, 1)
print("quad", round(v, 6), float(interp1d([0, 1], [0, 5])(0.5)))
`},
	{name: "seaborn png", want: "png", code: `
import pandas as pd
import seaborn as sns
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": list(range(20)), "y": [i * i for i in range(20)], "g": ["a", "b"] * 10})
ax = sns.scatterplot(data=df, x="x", y="y", hue="g")
p = "/workspace/seaborn.png"
ax.figure.savefig(p)
` + pngCheck},
	{name: "matplotlib bar chart", want: "png", code: `
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.bar(["a", "b", "c"], [3, 1, 2])
ax.set_title("Sales")
p = "/workspace/bar.png"
fig.savefig(p)
` + pngCheck},
	{name: "pandas plot", want: "png", code: `
import pandas as pd
ax = pd.Series([1, 3, 2], index=["x", "y", "z"]).plot(kind="line")
p = "/workspace/line.png"
ax.get_figure().savefig(p)
` + pngCheck},
	{name: "sklearn linear regression", want: "sklearn 2.0 True", code: `
import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split
X = np.arange(100, dtype=float).reshape(-1, 1)
y = 2 * X.ravel() + 1
Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
m = LinearRegression().fit(Xtr, ytr)
print("sklearn", round(float(m.coef_[0]), 6), m.score(Xte, yte) > 0.999)
`},
	{name: "sklearn pipeline kmeans", want: "kmeans 2", code: `
import numpy as np
from sklearn.cluster import KMeans
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
X = np.vstack([np.zeros((20, 2)), np.ones((20, 2)) * 10])
p = make_pipeline(StandardScaler(), KMeans(n_clusters=2, n_init=3, random_state=0)).fit(X)
print("kmeans", len(set(p[-1].labels_)))
`},
	{name: "statsmodels ols", want: "ols [1. 3.]", code: `
import numpy as np
import statsmodels.api as sm
x = np.arange(50, dtype=float)
res = sm.OLS(1 + 3 * x, sm.add_constant(x)).fit()
print("ols", np.round(res.params, 6))
`},
	{name: "statsmodels formula", want: "formula True", code: `
import pandas as pd
import statsmodels.formula.api as smf
df = pd.DataFrame({"y": [1.0, 3.1, 4.9, 7.2, 9.0], "x": [0, 1, 2, 3, 4]})
res = smf.ols("y ~ x", data=df).fit()
print("formula", abs(res.params["x"] - 2) < 0.1)
`},
	{name: "locale", want: "locale UTF-8", code: `
import locale
locale.setlocale(locale.LC_ALL, "")
print("locale", locale.getlocale()[1])
`},
	{name: "workspace disk usage", want: "disk 536870912", code: `
import shutil
print("disk", shutil.disk_usage("/workspace").total)
`},
	{name: "json and regex on a frame", want: `json [{"code":"A","n":12},{"code":"B","n":7}]`, code: `
import json
import pandas as pd
df = pd.DataFrame({"raw": ["A-12", "B-7"]})
df[["code", "n"]] = df["raw"].str.extract(r"([A-Z])-(\d+)")
df["n"] = df["n"].astype(int)
print("json", json.dumps(json.loads(df[["code", "n"]].to_json(orient="records")), separators=(",", ":")))
`},
	{name: "missing values", want: "missing 1 1.5", code: `
import io
import pandas as pd
df = pd.read_csv(io.StringIO("a,b\n1,\n2,3\n,5\n"))
print("missing", int(df["a"].isna().sum()), df["a"].fillna(df["a"].mean()).iloc[2])
`},
}

// TestDatasciSnippets runs ordinary agent data code under the datasci
// policy: each snippet must end ok, print what it computed and record no
// violation.
func TestDatasciSnippets(t *testing.T) {
	needRoot(t)
	needDatasci(t)
	start := time.Now()
	for _, s := range datasciSnippets {
		t.Run(strings.ReplaceAll(s.name, " ", "_"), func(t *testing.T) {
			o := runPyLayer(t, "datasci", s.code)
			o.wantStatus(t, result.StatusOK)
			if !strings.Contains(o.res.Stdout, s.want) {
				t.Errorf("stdout %q, want %q in it\nstderr: %s", o.res.Stdout, s.want, o.res.Stderr)
			}
			for _, v := range o.res.Violations {
				t.Errorf("violation %+v", v)
			}
		})
	}
	t.Logf("%d snippets in %v", len(datasciSnippets), time.Since(start).Round(time.Millisecond))
}
