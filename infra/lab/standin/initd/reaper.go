package initd

import (
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// reaper owns every wait4 in the process. As PID 1 it must collect all
// zombies (orphaned static-pod processes land here), which means exec.Cmd's
// Wait cannot be used: the reaper would steal its child's status. Instead
// children are started through spawn, which registers their PID under the
// same lock the reaper takes before looking a PID up, so an exit collected
// before registration still finds its waiter.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
}

func newReaper() *reaper {
	return &reaper{waiters: map[int]chan unix.WaitStatus{}}
}

// spawn starts a process and returns a channel that receives its status.
func (r *reaper) spawn(path string, argv []string, attr *os.ProcAttr) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[p.Pid] = ch
	pid := p.Pid
	_ = p.Release() // drops the pidfd; we only ever use the PID
	return pid, ch, nil
}

// run reaps on every SIGCHLD, and once a second in case one was coalesced
// away while reap was busy.
func (r *reaper) run(stop <-chan struct{}) {
	sig := make(chan os.Signal, 32)
	signal.Notify(sig, unix.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.reap()
		select {
		case <-sig:
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

func (r *reaper) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ch != nil {
			ch <- ws
		}
	}
}
