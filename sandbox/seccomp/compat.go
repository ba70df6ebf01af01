package seccomp

// Cache is the supervisor's former entry point, kept until its call site
// moves to LoadFilter; delete this file then.
//
// Deprecated: use LoadFilter(profile, Dir).
type Cache struct {
	// Dir is LoadFilter's cacheDir.
	Dir string
}

// Load is LoadFilter(nameOrPath, c.Dir).
func (c Cache) Load(nameOrPath string) (*Program, error) { return LoadFilter(nameOrPath, c.Dir) }
