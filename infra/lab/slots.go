package lab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// Labs whose directories differ have different names (Names), so several
// run on one machine at once. What limits them is the machine: an idle
// 7-node cluster measured 0.54 (stand-ins) to 0.64 (real nodes) of a core
// and 2.85 GiB, and a fresh up 0.82 of a core. Two stack tests side by
// side on two cores left no core idle (CPU pressure 92%) and each took
// 3.5 times as long as alone (docs/lab.md): a lab needs two cores to
// itself to gain anything. The slots below are how many labs the tests
// (and the lab benchmark) run at once; each holder takes one, as a lock
// file under /run/lock, so the count holds across the test binaries `go
// test ./...` runs in parallel.

// EnvSlots overrides the machine's slot count.
const EnvSlots = envvars.LabSlots

// slotLock is slot i's lock file.
func slotLock(i int) string { return fmt.Sprintf("/run/lock/homelab-lab.%d.lock", i) }

// memoryPerLab is what one lab is given: a real 7-node cluster's 2.85 GiB,
// the Pulumi engine and provider beside it, and room for an upgrade's
// second set of control-plane containers.
const memoryPerLab = 6 << 30

// Slots is how many labs may be up at once on this machine: $HOMELAB_LAB_SLOTS,
// else one per two cores and per 6 GiB of memory, at least one.
func Slots() (int, error) {
	if v := os.Getenv(EnvSlots); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s=%q: want a whole number of labs, at least 1", EnvSlots, v)
		}
		return n, nil
	}
	return slotsFor(runtime.NumCPU(), memTotal()), nil
}

// coresPerLab: see the measurements above.
const coresPerLab = 2

func slotsFor(cores int, memory uint64) int {
	n := min(cores/coresPerLab, int(memory/memoryPerLab))
	return max(n, 1)
}

// memTotal is the machine's memory in bytes (0 when unknown).
func memTotal() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// flockFile opens path (and its directory) and flocks it with how; the
// lock lasts until the file is closed.
func flockFile(path string, how int) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// buildLock serialises the labs' writes to the shared tool cache.
const buildLock = "/run/lock/homelab-lab-build.lock"

// lockBuilds waits until no other lab is building into the tool cache.
func lockBuilds() (release func(), err error) {
	f, err := flockFile(buildLock, unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// TakeSlot waits until one of the machine's slots is free, takes it and
// returns which, with its release. Tests that bring a lab up hold one from
// up to down.
func TakeSlot() (slot int, release func(), err error) {
	n, err := Slots()
	if err != nil {
		return 0, nil, err
	}
	for {
		for i := range n {
			f, err := flockFile(slotLock(i), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				return i, func() { f.Close() }, nil
			}
			if !errors.Is(err, unix.EWOULDBLOCK) {
				return 0, nil, err
			}
		}
		// flock cannot wait for any one of several files: poll. A lab
		// test holds its slot for minutes, so a second is nothing.
		time.Sleep(time.Second)
	}
}

// TakeMachine waits for every slot and takes them all: for a measurement
// that must have the machine's cores to itself (the lab benchmark).
// Slots are taken in order, so two such holders cannot deadlock.
func TakeMachine() (release func(), err error) {
	n, err := Slots()
	if err != nil {
		return nil, err
	}
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close()
		}
	}
	for i := range n {
		f, err := flockFile(slotLock(i), unix.LOCK_EX)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, f)
	}
	return release, nil
}

// Ledger is where every test that holds a slot appends how long it waited
// for it and held it, as TSV (start, test, waited s, held s, pass or fail,
// slot): go test prints no durations for passing tests, and these make up
// most of a CI run.
const Ledger = "/var/tmp/homelab-lab-tests.tsv"

// Holder is the part of testing.TB that HoldSlot uses.
type Holder interface {
	Name() string
	Failed() bool
	Logf(format string, args ...any)
	Cleanup(func())
}

// HoldSlot is TakeSlot for a test: released when the test ends (its other
// clean-ups, registered later, run first), with the wait logged and the
// hold recorded in Ledger.
func HoldSlot(t Holder) error {
	asked := time.Now()
	slot, release, err := TakeSlot()
	if err != nil {
		return err
	}
	held := time.Now()
	if w := held.Sub(asked); w > time.Second {
		// Other packages' lab tests run in parallel processes and wait
		// here: the test's own figures start after this.
		t.Logf("figures: waited %s for a lab slot", w.Round(time.Second))
	}
	t.Cleanup(func() {
		release()
		result := "pass"
		if t.Failed() {
			result = "fail"
		}
		f, err := os.OpenFile(Ledger, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "%s\t%s\t%.0f\t%.0f\t%s\t%d\n", asked.UTC().Format(time.RFC3339), t.Name(),
			held.Sub(asked).Seconds(), time.Since(held).Seconds(), result, slot)
	})
	return nil
}
