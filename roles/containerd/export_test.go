package containerd

// The real containerds, for the oracle tests of the package containerd_test
// (those that need roles/gpu, which imports this package through the
// inventory).
var (
	RealContainerd1 = realContainerd1
	RealContainerd2 = realContainerd2
)
