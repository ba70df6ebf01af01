package rootfs

import (
	"reflect"
	"testing"
)

func TestModules(t *testing.T) {
	sp := "/venv/lib/python3.11/site-packages"
	m := &Manifest{Python: Python{Path: "/venv/bin/python", Version: "3.11.2"}}
	for _, f := range []File{
		{Path: sp, Type: TypeDir},
		{Path: sp + "/numpy", Type: TypeDir},
		{Path: sp + "/numpy/__init__.py", Type: TypeFile},
		{Path: sp + "/numpy.libs", Type: TypeDir},
		{Path: sp + "/numpy-2.4.6.dist-info", Type: TypeDir},
		{Path: sp + "/mpl_toolkits", Type: TypeDir},
		{Path: sp + "/six.py", Type: TypeFile},
		{Path: sp + "/kiwisolver.cpython-311-x86_64-linux-gnu.so", Type: TypeFile},
		{Path: sp + "/_cffi_backend.abi3.so", Type: TypeFile},
		{Path: sp + "/distutils-precedence.pth", Type: TypeFile},
		{Path: sp + "/__pycache__", Type: TypeDir},
		{Path: sp + "/__pycache__/six.cpython-311.pyc", Type: TypeFile},
		{Path: sp + "/link", Type: TypeSymlink, Target: "numpy"},
		{Path: sp + "/x-1.0.data", Type: TypeDir},
		{Path: sp + "/wrapt-stubs", Type: TypeDir},
		{Path: sp + "/2fast.py", Type: TypeFile},
		{Path: "/usr/lib/python3.11/json", Type: TypeDir},
	} {
		m.Files = append(m.Files, f)
	}
	want := []string{"_cffi_backend", "kiwisolver", "mpl_toolkits", "numpy", "six"}
	if got := m.Modules(); !reflect.DeepEqual(got, want) {
		t.Errorf("Modules() = %q, want %q", got, want)
	}
	if got := SitePackages("3.12.0rc1"); got != "/venv/lib/python3.12/site-packages" {
		t.Errorf("SitePackages = %q", got)
	}
}
