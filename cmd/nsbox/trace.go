package main

import (
	"github.com/nsbox/nsbox/sandbox/trace"
)

// mainStarted is when package main was initialised: after the runtime and
// every imported package, a fraction of a millisecond after exec.
var mainStarted = trace.Now()

// newTrace returns the run's one recorder (--trace-phases), timing from
// mainStarted: the command's own steps (start-up, policy, plan, the
// audit row), the supervisor's and the init's all go into it, so the
// phases cover the whole command but Go's start-up before main and the
// printing of the result.
func newTrace(on bool) *trace.Recorder {
	t := trace.New(on, mainStarted)
	t.Mark("start-up")
	return t
}
