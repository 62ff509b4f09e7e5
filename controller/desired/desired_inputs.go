package desired

// Inputs are what the builders need besides the WebApp: what a reconcile observed that the desired state
// depends on, read once per reconcile.
type Inputs struct {
	// configHash is the hash of the data of the ConfigMaps and Secrets the WebApp refers to ("" when none).
	ConfigHash string
	// hpaExists: the WebApp's HorizontalPodAutoscaler exists (in the cache, controlled by the WebApp), so it
	// decides the count.
	HPAExists bool
	// deploymentMissing: the WebApp's Deployment is not in the cache as its own, so the apply creates it. It is
	// created with the WebApp's count even when the HPA decides it: a Deployment created without one starts at the
	// API's default of 1 (below the HPA's minimum) until the HPA's next sync; the count is handed over from there.
	DeploymentMissing bool
}
