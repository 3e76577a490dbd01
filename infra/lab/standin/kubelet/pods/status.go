// Package pods is the kubelet stand-in's handling of the pods the API
// binds to its node (DaemonSet and Deployment pods, anything with restart
// policy Always): it asks the container runtime for each pod's sandbox as
// the kubelet does, and posts the status the kubelet would, so a pod is
// Running and Ready only where the real node would run it. For restart
// policy Always no container process is started: a pod's containers count
// as running once its sandbox exists, its volumes and configuration
// resolve and (for a few containers the lab emulates, see Agent) their
// start-up effect on the node happened. Pods with restart policy Never or
// OnFailure (Jobs') are run: their containers' binaries from the image
// tree, to the exit code that makes them Succeeded or Failed (complete.go).
package pods

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// View is what the kubelet knows of one pod on its node.
type View struct {
	NodeIP string
	// Sandbox: the runtime set the pod's sandbox up; PodIP is its address
	// (the node's for a host-network pod).
	Sandbox bool
	PodIP   string
	// Started is when the containers last started; zero: not running.
	Started time.Time
	// Restarts and LastExit describe a crash-looping start.
	Restarts int
	LastExit string
	// Waiting is why the containers are not running (ContainerCreating,
	// CreateContainerConfigError, CrashLoopBackOff), with a message.
	Waiting, WaitingMessage string
}

// Status is the status the kubelet posts for pod in view v at now. The
// times of conditions that keep their status are kept.
func Status(pod *corev1.Pod, v View, now time.Time) corev1.PodStatus {
	old := pod.Status
	running := !v.Started.IsZero()
	st := corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: old.QOSClass,
		HostIP:   v.NodeIP,
	}
	if v.NodeIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: v.NodeIP}}
	}
	if v.Sandbox && v.PodIP != "" {
		st.PodIP = v.PodIP
		st.PodIPs = []corev1.PodIP{{IP: v.PodIP}}
	}
	st.StartTime = old.StartTime
	if st.StartTime == nil {
		st.StartTime = &metav1.Time{Time: now}
	}
	if running || v.Restarts > 0 {
		// Restart policy Always: a crash-looping pod stays Running.
		st.Phase = corev1.PodRunning
	}
	initialized := running || len(pod.Spec.InitContainers) == 0
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		return condition(old.Conditions, now, t, ok, reason)
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, v.Sandbox, ""),
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized"),
		cond(corev1.PodReady, running, "ContainersNotReady"),
		cond(corev1.ContainersReady, running, "ContainersNotReady"),
		cond(corev1.PodScheduled, true, ""),
	}
	for _, c := range pod.Spec.InitContainers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
		if running {
			cs.Ready, cs.ImageID, cs.ContainerID = true, imageID(c.Image), containerID(pod, c.Name, v.Started)
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.Time{Time: v.Started}, FinishedAt: metav1.Time{Time: v.Started}}
		} else {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	for i, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: int32(v.Restarts), Started: ptr.To(running)}
		switch {
		case running:
			cs.Ready, cs.ImageID, cs.ContainerID = true, imageID(c.Image), containerID(pod, c.Name, v.Started)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: v.Started}}
		case initialized || v.Waiting != "ContainerCreating":
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: v.Waiting, Message: v.WaitingMessage}
			if i > 0 && v.Waiting == "CrashLoopBackOff" {
				// Only the container that crashed loops; the others wait.
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			}
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
		}
		if v.LastExit != "" && i == 0 {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: v.LastExit}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

func containerID(pod *corev1.Pod, name string, started time.Time) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", pod.UID, name, started.UnixNano()))
	return "containerd://" + hex.EncodeToString(sum[:])
}

// imageID makes up the digest reference a runtime reports.
func imageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	return image + "@sha256:" + hex.EncodeToString(sum[:])
}

// backoffUnit is the first crash-loop delay (a variable for tests).
var backoffUnit = 10 * time.Second

// backoff is the kubelet's crash-loop delay: 10 s doubling up to 5 min.
func backoff(restarts int) time.Duration {
	d := backoffUnit
	for i := 1; i < restarts && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// condition is a pod condition of type t, true when ok (else false for
// reason), that keeps its last transition time from old while its status
// stays, and takes now when it changes.
func condition(old []corev1.PodCondition, now time.Time, t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
	c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Time{Time: now}}
	if ok {
		c.Status = corev1.ConditionTrue
	} else {
		c.Reason = reason
	}
	for _, o := range old {
		if o.Type == t && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
	}
	return c
}

// ConditionsDiffer says whether the API's pod conditions (live) say other
// than the kubelet's (want) for a type the kubelet sets. The node
// lifecycle controller marks a NotReady node's pods Ready=False; the
// kubelet's status manager finds its cached status no longer in the API
// and posts it again, so a stand-in that only posts what changed on its
// side would leave them not Ready for good.
func ConditionsDiffer(live, want []corev1.PodCondition) bool {
	for _, w := range want {
		found := false
		for _, l := range live {
			if l.Type == w.Type {
				found = true
				if l.Status != w.Status {
					return true
				}
			}
		}
		if !found {
			return true
		}
	}
	return false
}
