package cluster

import (
	"runtime"
	"time"
)

// referenceCores is the machine the harness's waits were set on: 2 cores, as CI's and a newcomer's here.
const referenceCores = 2

// Patience is d for a wait that is patience with the machine, not a promise of the operator (a component's start,
// a process's first answer), scaled by how many fewer cores than the reference this run may use: runtime.NumCPU
// reads the process's affinity, so a run pinned to one core (make test-cold) waits twice as long. A wait whose
// bound is the operator's promise (Ready within N s, a rollback within 15 s) keeps its bound and does not call it.
func Patience(d time.Duration) time.Duration {
	if n := runtime.NumCPU(); n < referenceCores {
		return d * referenceCores / time.Duration(n)
	}
	return d
}
