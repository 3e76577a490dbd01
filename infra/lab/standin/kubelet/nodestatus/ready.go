package nodestatus

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// RuntimeCondition is one condition the container runtime's Status
// reported (the CRI's RuntimeReady or NetworkReady).
type RuntimeCondition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// String is the kubelet's rendering of a runtime condition.
func (c *RuntimeCondition) String() string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", c.Type, c.Status, c.Reason, c.Message)
}

// Runtime is what the kubelet last learnt from its container runtime.
type Runtime struct {
	// LastSync is when the runtime last answered Status ready; zero
	// before it ever did.
	LastSync time.Time
	// RuntimeReady and NetworkReady are the last answer's conditions (nil:
	// not reported).
	RuntimeReady, NetworkReady *RuntimeCondition
	// Answered: at least one Status call succeeded.
	Answered bool
}

// RuntimeDownAfter is how long the kubelet tolerates no ready answer from
// the runtime before it calls it down (the kubelet's
// maxWaitForContainerRuntime).
const RuntimeDownAfter = 30 * time.Second

// NetworkError is the kubelet's error while the runtime's network is not
// ready (nil once it is): pods that need a pod network are not started.
func (rt Runtime) NetworkError() error {
	if !rt.Answered {
		return nil
	}
	if rt.NetworkReady == nil || !rt.NetworkReady.Status {
		return fmt.Errorf("container runtime network not ready: %v", rt.NetworkReady)
	}
	return nil
}

func (rt Runtime) runtimeError(now time.Time) error {
	var errs []error
	switch {
	case rt.LastSync.IsZero():
		errs = append(errs, errors.New("container runtime status check may not have completed yet"))
	case !rt.LastSync.Add(RuntimeDownAfter).After(now):
		errs = append(errs, errors.New("container runtime is down"))
	}
	if rt.Answered && (rt.RuntimeReady == nil || !rt.RuntimeReady.Status) {
		errs = append(errs, fmt.Errorf("container runtime not ready: %v", rt.RuntimeReady))
	}
	return utilerrors.NewAggregate(errs)
}

// Ready is the Node's Ready condition the kubelet posts for rt at now:
// True only while the runtime answers ready and its network is ready;
// otherwise False, reason KubeletNotReady, with the runtime's errors as the
// message, word for word as the kubelet writes them.
func Ready(rt Runtime, now time.Time) (status corev1.ConditionStatus, reason, message string) {
	agg := utilerrors.NewAggregate([]error{rt.runtimeError(now), rt.NetworkError()})
	if agg != nil {
		return corev1.ConditionFalse, "KubeletNotReady", agg.Error()
	}
	return corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
}
