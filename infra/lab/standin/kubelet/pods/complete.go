package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

// Run-to-completion pods (restart policy Never or OnFailure: Jobs' pods,
// kubeadm's upgrade health check) are the ones whose containers the
// stand-in really runs: the outcome is the pod's status, and the lab can
// only report one by running the container. Each container runs its
// image's binary from the lab's image tree (the image's base name when the
// container has no command, as for static pods) with its command and args,
// as a process of the node, under a shell that writes its exit code to the
// pod's state directory, so the code survives a restart of the kubelet as
// it survives one in containerd. An image the tree lacks is a failed pull
// (ErrImagePull, then ImagePullBackOff), never a start.

// containerRun is what the stand-in keeps of one container of a
// run-to-completion pod.
type containerRun struct {
	Name string `json:"name"`
	Init bool   `json:"init,omitempty"`
	// Proc is the shell the container runs under; zero PID: not running.
	Proc     staticpod.Record `json:"proc,omitzero"`
	Started  time.Time        `json:"started,omitzero"`
	Finished time.Time        `json:"finished,omitzero"`
	// Exited: Finished with ExitCode, Reason (Completed, Error,
	// StartError, ContainerStatusUnknown) and Message.
	Exited   bool   `json:"exited,omitempty"`
	ExitCode int32  `json:"exitCode,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Restarts int    `json:"restarts,omitempty"`
	// Last is the previous run's end (restart policy OnFailure).
	Last *containerRun `json:"last,omitempty"`
	// Waiting is why it is not running (ErrImagePull, ImagePullBackOff,
	// CrashLoopBackOff), until NextTry.
	Waiting        string    `json:"waiting,omitempty"`
	WaitingMessage string    `json:"waitingMessage,omitempty"`
	NextTry        time.Time `json:"nextTry,omitzero"`
	PullFailures   int       `json:"pullFailures,omitempty"`
}

func (c *containerRun) running() bool   { return c.Proc.PID > 0 && !c.Exited }
func (c *containerRun) succeeded() bool { return c.Exited && c.ExitCode == 0 }

func runsToCompletion(pod *corev1.Pod) bool {
	return pod.Spec.RestartPolicy == corev1.RestartPolicyNever || pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
}

func terminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// runDir holds a pod's exit files.
func (s *syncer) runDir(uid string) string { return filepath.Join(s.o.StateDir, uid) }

func (s *syncer) container(r *record, name string, init bool) *containerRun {
	for i := range r.Containers {
		if r.Containers[i].Name == name {
			return &r.Containers[i]
		}
	}
	r.Containers = append(r.Containers, containerRun{Name: name, Init: init})
	return &r.Containers[len(r.Containers)-1]
}

// reap notes the containers that ended since the last look: their exit
// file, or, for a shell gone without one (killed), an unknown end, as the
// kubelet reports a container its runtime lost.
func (s *syncer) reap(r *record) bool {
	changed := false
	for i := range r.Containers {
		c := &r.Containers[i]
		if !c.running() {
			continue
		}
		exitFile := filepath.Join(s.runDir(string(r.UID)), c.Name+".exit")
		code, at, ok := readExit(exitFile)
		if !ok {
			if c.Proc.Alive() {
				continue
			}
			// It may have written the file just before it ended.
			if code, at, ok = readExit(exitFile); !ok {
				c.Exited, c.ExitCode, c.Finished = true, 137, time.Now()
				c.Reason, c.Message = "ContainerStatusUnknown", "The container could not be located when the pod was terminated"
				changed = true
				continue
			}
		}
		c.Exited, c.ExitCode, c.Finished = true, code, at
		c.Reason = "Completed"
		if code != 0 {
			c.Reason = "Error"
		}
		changed = true
		s.o.Logf("pod %s/%s: container %s exited with %d", r.Namespace, r.Name, c.Name, code)
	}
	return changed
}

func readExit(path string) (int32, time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, time.Time{}, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, time.Time{}, false
	}
	at := time.Now()
	if fi, err := os.Stat(path); err == nil {
		at = fi.ModTime()
	}
	return int32(n), at, true
}

// plan says what a run-to-completion pod does next: the containers to
// start (init containers one at a time, in order, then every container),
// and its phase from what ran.
func plan(pod *corev1.Pod, r *record) (start []*containerRun, phase corev1.PodPhase) {
	onFailure := pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
	find := func(name string) *containerRun {
		for i := range r.Containers {
			if r.Containers[i].Name == name {
				return &r.Containers[i]
			}
		}
		return nil
	}
	for _, ic := range pod.Spec.InitContainers {
		c := find(ic.Name)
		switch {
		case c == nil:
			return []*containerRun{{Name: ic.Name, Init: true}}, corev1.PodPending
		case c.succeeded():
			continue
		case c.running():
			return nil, corev1.PodPending
		case c.Exited && !onFailure:
			return nil, corev1.PodFailed
		default: // never started, or failed and restarted on failure
			return []*containerRun{c}, corev1.PodPending
		}
	}
	started, done, failed := false, 0, false
	for _, mc := range pod.Spec.Containers {
		c := find(mc.Name)
		switch {
		case c == nil:
			start = append(start, &containerRun{Name: mc.Name})
		case c.running():
			started = true
		case c.succeeded():
			started = true
			done++
		case c.Exited && !onFailure:
			started = true
			done++
			failed = true
		case c.Exited: // restarts after its back-off
			started = true
			start = append(start, c)
		default:
			if c.Restarts > 0 {
				started = true
			}
			start = append(start, c)
		}
	}
	switch {
	case done == len(pod.Spec.Containers) && failed:
		return nil, corev1.PodFailed
	case done == len(pod.Spec.Containers):
		return nil, corev1.PodSucceeded
	case started:
		return start, corev1.PodRunning
	}
	return start, corev1.PodPending
}

// syncRunToCompletion takes a Never or OnFailure pod a step further: the
// checks of syncPod before its first container, then its containers, and
// posts where it got. A pod the API already has as Succeeded or Failed is
// never run again: what is left of it on the node goes.
func (s *syncer) syncRunToCompletion(ctx context.Context, pod *corev1.Pod) error {
	if terminal(pod.Status.Phase) {
		return s.finish(ctx, pod)
	}
	r := s.load(pod)
	changed := s.reap(&r)
	if _, err := os.Stat(s.recordPath(pod.UID)); err != nil && len(r.Containers) == 0 {
		// Nothing kept (a reboot emptied /run): what the API says ran,
		// ran; the runtime lost it, as the kubelet reports.
		changed = seedFromStatus(pod, &r) || changed
	}
	onFailure := pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
	for i := range r.Containers {
		if c := &r.Containers[i]; onFailure && c.Exited && c.ExitCode != 0 && c.NextTry.IsZero() {
			c.NextTry = c.Finished.Add(backoff(c.Restarts + 1))
			changed = true
		}
	}
	if changed {
		if err := s.save(r); err != nil {
			return err
		}
	}
	now := time.Now()
	start, phase := plan(pod, &r)
	v := RunView{NodeIP: s.o.NodeIP, Phase: phase, Containers: r.Containers, Waiting: "ContainerCreating"}
	if r.SandboxID != "" {
		v.Sandbox, v.PodIP = true, r.PodIP
	}
	post := func() error { return s.postRun(ctx, pod, v) }
	if terminal(phase) || len(start) == 0 {
		return post()
	}

	lookup := s.lookup(ctx)
	if err := VolumeProblem(pod, lookup, s.o.Root); err != nil {
		s.event(ctx, pod, "FailedMount", err.Error())
		return post()
	}
	if err := s.o.NetworkError(); err != nil && !pod.Spec.HostNetwork {
		s.event(ctx, pod, "NetworkNotReady", "network is not ready: "+err.Error())
		return post()
	}
	sb, ip, err := s.sandbox(ctx, pod, r)
	if err != nil {
		s.event(ctx, pod, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return post()
	}
	if pod.Spec.HostNetwork || ip == "" {
		ip = s.o.NodeIP
	}
	if sb != r.SandboxID || ip != r.PodIP {
		r.SandboxID, r.PodIP = sb, ip
		if err := s.save(r); err != nil {
			return err
		}
	}
	v.Sandbox, v.PodIP = true, ip
	if err := ConfigProblem(pod, lookup); err != nil {
		v.Waiting, v.WaitingMessage = "CreateContainerConfigError", err.Error()
		s.event(ctx, pod, "Failed", "Error: "+err.Error())
		return post()
	}
	for _, want := range start {
		c := s.container(&r, want.Name, want.Init)
		if now.Before(c.NextTry) {
			continue
		}
		spec := containerSpec(pod, c.Name, c.Init)
		if err := s.startContainer(pod, spec, c); err != nil {
			return err
		}
		if c.Waiting == "ErrImagePull" {
			s.event(ctx, pod, "Failed", "Failed to pull image \""+spec.Image+"\": "+c.WaitingMessage)
		}
	}
	if err := s.save(r); err != nil {
		return err
	}
	v.Containers = r.Containers
	_, v.Phase = plan(pod, &r)
	return post()
}

func containerSpec(pod *corev1.Pod, name string, init bool) corev1.Container {
	list := pod.Spec.Containers
	if init {
		list = pod.Spec.InitContainers
	}
	for _, c := range list {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{Name: name}
}

// startContainer pulls (from the image tree) and starts one container, or
// notes why it could not.
func (s *syncer) startContainer(pod *corev1.Pod, spec corev1.Container, c *containerRun) error {
	now := time.Now()
	if c.Exited {
		// A restart (OnFailure): the run that ended becomes the last one.
		last := *c
		last.Last = nil
		c.Last = &last
		c.Restarts++
		c.Exited, c.ExitCode, c.Reason, c.Message = false, 0, "", ""
		c.Proc, c.Started, c.Finished = staticpod.Record{}, time.Time{}, time.Time{}
	}
	argv := append(append([]string{}, spec.Command...), spec.Args...)
	name := ""
	if len(spec.Command) > 0 {
		name = spec.Command[0]
	} else {
		// No entrypoint metadata in the tree: the image's base name is
		// its binary, as for the control-plane images.
		ref, _, err := images.Ref(spec.Image)
		if err != nil {
			return s.pullFailed(c, err, now)
		}
		name = filepath.Base(ref)
		argv = append([]string{name}, argv...)
	}
	bin, err := s.binary(spec.Image, name)
	if errors.Is(err, images.ErrNotFound) || (err != nil && spec.Image == "") {
		return s.pullFailed(c, err, now)
	}
	c.PullFailures, c.Waiting, c.WaitingMessage = 0, "", ""
	if err != nil {
		// The image is there but has no such executable: the runtime
		// fails the start, exit code 128.
		c.Exited, c.ExitCode, c.Reason, c.Started, c.Finished = true, 128, "StartError", now, now
		c.Message = fmt.Sprintf("failed to create containerd task: exec: %q: executable file not found in $PATH", name)
		s.noteExit(pod, c)
		return nil
	}
	dir := s.runDir(string(pod.UID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	exitFile := filepath.Join(dir, c.Name+".exit")
	_ = os.Remove(exitFile)
	logDir := filepath.Join(s.o.LogDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(logDir, strconv.Itoa(c.Restarts)+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The shell stays as the container's parent, keeps its exit code in
	// the file (written whole, then renamed) and outlives the kubelet.
	script := `f=$1; shift; "$@"; echo $? > "$f.tmp" && mv "$f.tmp" "$f"`
	shArgv := append([]string{"/bin/sh", "-c", script, "sh", exitFile, bin}, argv[1:]...)
	env := append([]string{}, s.o.Env...)
	for _, e := range spec.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	wd := spec.WorkingDir
	if wd == "" {
		wd = "/"
	}
	cmd := &exec.Cmd{Path: "/bin/sh", Args: shArgv, Env: env, Dir: wd, Stdout: logFile, Stderr: logFile,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		c.Exited, c.ExitCode, c.Reason, c.Message, c.Started, c.Finished = true, 128, "StartError", err.Error(), now, now
		s.noteExit(pod, c)
		return nil
	}
	ticks, _ := staticpod.ProcessStartTime(cmd.Process.Pid)
	c.Proc = staticpod.Record{Name: c.Name, PID: cmd.Process.Pid, StartTime: ticks, Argv: shArgv, Started: now}
	c.Started, c.NextTry = now, time.Time{}
	s.o.Logf("pod %s/%s: container %s started (%s, pid %d)", pod.Namespace, pod.Name, c.Name, strings.Join(argv, " "), cmd.Process.Pid)
	go func() {
		// Reap the shell; its end is read from the exit file.
		_ = cmd.Wait()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}()
	return nil
}

// seedFromStatus takes the containers the pod's status shows as started
// as ended: terminated ones as they ended, running ones lost (exit code
// 137, ContainerStatusUnknown), so a Never pod is not run twice.
func seedFromStatus(pod *corev1.Pod, r *record) bool {
	seeded := false
	add := func(list []corev1.ContainerStatus, init bool) {
		for _, cs := range list {
			if cs.ContainerID == "" {
				continue
			}
			c := containerRun{Name: cs.Name, Init: init, Exited: true, Restarts: int(cs.RestartCount), Finished: time.Now(),
				ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated"}
			if t := cs.State.Terminated; t != nil {
				c.ExitCode, c.Reason, c.Message, c.Started, c.Finished = t.ExitCode, t.Reason, t.Message, t.StartedAt.Time, t.FinishedAt.Time
			} else if run := cs.State.Running; run != nil {
				c.Started = run.StartedAt.Time
			}
			r.Containers = append(r.Containers, c)
			seeded = true
		}
	}
	add(pod.Status.InitContainerStatuses, true)
	add(pod.Status.ContainerStatuses, false)
	return seeded
}

// noteExit sets the back-off of a container that ended badly and will be
// restarted.
func (s *syncer) noteExit(pod *corev1.Pod, c *containerRun) {
	if c.ExitCode != 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
		c.NextTry = c.Finished.Add(backoff(c.Restarts + 1))
	}
}

func (s *syncer) pullFailed(c *containerRun, err error, now time.Time) error {
	c.PullFailures++
	c.Waiting, c.WaitingMessage = "ErrImagePull", err.Error()
	if c.PullFailures > 1 {
		c.Waiting = "ImagePullBackOff"
	}
	c.NextTry = now.Add(backoff(c.PullFailures))
	return nil
}

// binary is the executable a container of image runs as name: from the
// image tree, or (no tree: tests) the kubelet's PATH.
func (s *syncer) binary(image, name string) (string, error) {
	if s.o.Images != nil {
		if image == "" {
			return "", errors.New("container has no image")
		}
		if !s.o.Images.Has(image) {
			_, err := s.o.Images.Image(image)
			return "", err
		}
		return s.o.Images.Binary(image, name)
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range s.o.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in $PATH", name)
}

// finish ends what is left on the node of a pod that is over (terminal in
// the API, or being deleted): its containers' processes, its sandbox, its
// record.
func (s *syncer) finish(ctx context.Context, pod *corev1.Pod) error {
	if _, err := os.Stat(s.recordPath(pod.UID)); err != nil {
		return nil // nothing left
	}
	s.stopContainers(s.load(pod))
	if err := s.removeSandboxes(ctx, string(pod.UID)); err != nil {
		return err
	}
	_ = os.RemoveAll(s.runDir(string(pod.UID)))
	return os.Remove(s.recordPath(pod.UID))
}

func (s *syncer) stopContainers(r record) {
	for _, c := range r.Containers {
		if c.running() {
			c.Proc.Stop(2 * time.Second)
		}
	}
}

// RunView is what the kubelet knows of a run-to-completion pod.
type RunView struct {
	NodeIP  string
	Sandbox bool
	PodIP   string
	Phase   corev1.PodPhase
	// Containers are the runs so far (a container not in it has not
	// started).
	Containers []containerRun
	// Waiting is why containers not yet run wait (ContainerCreating,
	// CreateContainerConfigError), with a message.
	Waiting, WaitingMessage string
}

func (s *syncer) postRun(ctx context.Context, pod *corev1.Pod, v RunView) error {
	key := fmt.Sprintf("%v|%v|%s|%s|%s|%s", v.Sandbox, v.PodIP, v.Phase, v.Waiting, v.WaitingMessage, runKey(v.Containers))
	return s.postStatus(ctx, pod, key, func(now time.Time) corev1.PodStatus { return RunStatus(pod, v, now) })
}

func runKey(cs []containerRun) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s:%d:%v:%d:%s:%s:%d;", c.Name, c.Proc.PID, c.Exited, c.ExitCode, c.Reason, c.Waiting, c.Restarts)
	}
	return b.String()
}

// RunStatus is the status the kubelet posts for a run-to-completion pod.
func RunStatus(pod *corev1.Pod, v RunView, now time.Time) corev1.PodStatus {
	old := pod.Status
	st := corev1.PodStatus{Phase: v.Phase, QOSClass: old.QOSClass, HostIP: v.NodeIP, StartTime: old.StartTime}
	if st.Phase == "" {
		st.Phase = corev1.PodPending
	}
	if v.NodeIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: v.NodeIP}}
	}
	if v.Sandbox && v.PodIP != "" {
		st.PodIP = v.PodIP
		st.PodIPs = []corev1.PodIP{{IP: v.PodIP}}
	}
	if st.StartTime == nil {
		st.StartTime = &metav1.Time{Time: now}
	}
	runs := map[string]containerRun{}
	for _, c := range v.Containers {
		runs[c.Name] = c
	}
	status := func(c corev1.Container, init bool) corev1.ContainerStatus {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false)}
		r, ok := runs[c.Name]
		if !ok {
			reason, msg := v.Waiting, v.WaitingMessage
			if init && reason == "ContainerCreating" {
				reason = "PodInitializing"
			}
			if !init && len(pod.Spec.InitContainers) > 0 && reason == "ContainerCreating" {
				reason = "PodInitializing"
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
			return cs
		}
		cs.RestartCount = int32(r.Restarts)
		if !r.Started.IsZero() || r.Exited {
			cs.ImageID = imageID(c.Image)
			cs.ContainerID = containerID(pod, c.Name, r.Started)
		}
		switch {
		case r.Exited:
			cs.State.Terminated = terminated(r)
			if r.ExitCode != 0 && !r.NextTry.IsZero() && now.Before(r.NextTry) {
				// OnFailure: waits for its restart.
				cs.LastTerminationState.Terminated = terminated(r)
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backoff(r.Restarts+1), c.Name, pod.Name, pod.Namespace, pod.UID)}}
			}
		case r.running():
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: r.Started}}
			cs.Started, cs.Ready = ptr.To(true), !init
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: r.Waiting, Message: r.WaitingMessage}
		}
		if r.Last != nil && cs.LastTerminationState.Terminated == nil {
			cs.LastTerminationState.Terminated = terminated(*r.Last)
		}
		return cs
	}
	initialized := true
	for _, c := range pod.Spec.InitContainers {
		cs := status(c, true)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initialized = false
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	ready := st.Phase == corev1.PodRunning
	for _, c := range pod.Spec.Containers {
		cs := status(c, false)
		if !cs.Ready {
			ready = false
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	notReady := "ContainersNotReady"
	if terminal(st.Phase) {
		notReady = "PodCompleted"
	}
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		return condition(old.Conditions, now, t, ok, reason)
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, v.Sandbox && !terminal(st.Phase), ""),
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized"),
		cond(corev1.PodReady, ready, notReady),
		cond(corev1.ContainersReady, ready, notReady),
		cond(corev1.PodScheduled, true, ""),
	}
	return st
}

func terminated(r containerRun) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: r.ExitCode, Reason: r.Reason, Message: r.Message,
		StartedAt: metav1.Time{Time: r.Started}, FinishedAt: metav1.Time{Time: r.Finished}}
}
