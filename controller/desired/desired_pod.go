package desired

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// The parts of the pod template beyond the app's one container: volumes and mounts, writable paths, identity,
// placement, init containers and sidecars, and graceful shutdown. Each adds nothing when its field is unset, so
// the pod template of a WebApp that sets none is the one earlier releases built (an upgrade rolls no pod).

// writableVolume names the emptyDir of the i-th writable path.
func writableVolume(i int) string {
	return fmt.Sprintf("%swritable-%d", webappv2.ReservedVolumePrefix, i)
}

// OwnedClaimVolume is the WebApp's volume with an owned claim (nil: none).
func OwnedClaimVolume(app *webappv2.WebApp) *webappv2.Volume {
	for i := range app.Spec.Volumes {
		if app.Spec.Volumes[i].Claim != nil {
			return &app.Spec.Volumes[i]
		}
	}
	return nil
}

// Recreates says whether the Deployment rolls out by Recreate: a claim the WebApp owns that only one pod (or one
// node) can mount at a time would keep the new pod of a rolling update from starting while the old one holds it.
func Recreates(app *webappv2.WebApp) bool {
	v := OwnedClaimVolume(app)
	return v != nil && v.Claim.SingleWriter()
}

// desiredVolumes are the pod's volumes: the WebApp's, in its order, then an emptyDir per writable path.
func desiredVolumes(app *webappv2.WebApp) []*corev1ac.VolumeApplyConfiguration {
	var out []*corev1ac.VolumeApplyConfiguration
	for _, v := range app.Spec.Volumes {
		vol := corev1ac.Volume().WithName(v.Name)
		switch {
		case v.ConfigMap != nil:
			s := corev1ac.ConfigMapVolumeSource().WithName(v.ConfigMap.Name)
			s.Items = keyPaths(v.ConfigMap.Items)
			s.DefaultMode, s.Optional = v.ConfigMap.DefaultMode, v.ConfigMap.Optional
			vol.WithConfigMap(s)
		case v.Secret != nil:
			s := corev1ac.SecretVolumeSource().WithSecretName(v.Secret.Name)
			s.Items = keyPaths(v.Secret.Items)
			s.DefaultMode, s.Optional = v.Secret.DefaultMode, v.Secret.Optional
			vol.WithSecret(s)
		case v.EmptyDir != nil:
			s := corev1ac.EmptyDirVolumeSource()
			if v.EmptyDir.Medium != "" {
				s.WithMedium(v.EmptyDir.Medium)
			}
			if v.EmptyDir.SizeLimit != nil {
				s.WithSizeLimit(v.EmptyDir.SizeLimit.Quantity())
			}
			vol.WithEmptyDir(s)
		case v.PersistentVolumeClaim != nil:
			s := corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(v.PersistentVolumeClaim.ClaimName)
			if v.PersistentVolumeClaim.ReadOnly {
				s.WithReadOnly(true)
			}
			vol.WithPersistentVolumeClaim(s)
		case v.Claim != nil:
			// The owned claim has the WebApp's name (see Claim).
			vol.WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(app.Name))
		}
		out = append(out, vol)
	}
	for i := range app.Spec.Container.WritablePaths {
		out = append(out, corev1ac.Volume().WithName(writableVolume(i)).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	}
	return out
}

// keyPaths are the chosen keys of a ConfigMap or Secret volume (nil: every key).
func keyPaths(items []webappv2.KeyToPath) []corev1ac.KeyToPathApplyConfiguration {
	var out []corev1ac.KeyToPathApplyConfiguration
	for _, it := range items {
		kp := corev1ac.KeyToPath().WithKey(it.Key).WithPath(it.Path)
		kp.Mode = it.Mode
		out = append(out, *kp)
	}
	return out
}

// volumeMounts are a container's mounts; the app's writable paths follow its own mounts.
func volumeMounts(mounts []webappv2.VolumeMount, writable []webappv2.AbsolutePath) []*corev1ac.VolumeMountApplyConfiguration {
	var out []*corev1ac.VolumeMountApplyConfiguration
	for _, m := range mounts {
		vm := corev1ac.VolumeMount().WithName(m.Name).WithMountPath(m.MountPath)
		if m.SubPath != "" {
			vm.WithSubPath(m.SubPath)
		}
		if m.ReadOnly {
			vm.WithReadOnly(true)
		}
		out = append(out, vm)
	}
	for i, p := range writable {
		out = append(out, corev1ac.VolumeMount().WithName(writableVolume(i)).WithMountPath(string(p)))
	}
	return out
}

// podPlacement sets the pod's identity, placement and shutdown fields the WebApp sets (none when it sets none).
func podPlacement(app *webappv2.WebApp, pod *corev1ac.PodSpecApplyConfiguration) error {
	p := app.Spec.Pod
	if p.ServiceAccountName != "" {
		pod.WithServiceAccountName(p.ServiceAccountName)
	}
	pod.AutomountServiceAccountToken = p.AutomountServiceAccountToken
	if len(p.NodeSelector) > 0 {
		pod.WithNodeSelector(p.NodeSelector)
	}
	if p.PriorityClassName != "" {
		pod.WithPriorityClassName(p.PriorityClassName)
	}
	pod.TerminationGracePeriodSeconds = p.TerminationGracePeriodSeconds
	var errs []error
	for i := range p.Tolerations {
		errs = append(errs, convert(&p.Tolerations[i], func(ac *corev1ac.TolerationApplyConfiguration) { pod.WithTolerations(ac) }))
	}
	if p.Affinity != nil {
		errs = append(errs, convert(p.Affinity, func(ac *corev1ac.AffinityApplyConfiguration) { pod.WithAffinity(ac) }))
	}
	for i := range p.TopologySpreadConstraints {
		errs = append(errs, convert(&p.TopologySpreadConstraints[i], func(ac *corev1ac.TopologySpreadConstraintApplyConfiguration) {
			pod.WithTopologySpreadConstraints(ac)
		}))
	}
	if s := p.Spread; s != nil {
		pod.WithTopologySpreadConstraints(spreadConstraint(app, s))
	}
	return errors.Join(errs...)
}

// spreadConstraint is the simple spread as a topology spread constraint over the WebApp's pods of one revision
// (matchLabelKeys pod-template-hash: during a rollout the old pods do not skew where the new ones go).
func spreadConstraint(app *webappv2.WebApp, s *webappv2.Spread) *corev1ac.TopologySpreadConstraintApplyConfiguration {
	key := corev1.LabelHostname
	if s.Across == webappv2.SpreadZones {
		key = corev1.LabelTopologyZone
	}
	when := corev1.ScheduleAnyway
	if s.Required {
		when = corev1.DoNotSchedule
	}
	skew := s.MaxSkew
	if skew == 0 {
		skew = 1
	}
	return corev1ac.TopologySpreadConstraint().
		WithMaxSkew(skew).
		WithTopologyKey(key).
		WithWhenUnsatisfiable(when).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(app))).
		WithMatchLabelKeys(appsv1.DefaultDeploymentUniqueLabelKey)
}

// desiredInitContainers are the init containers and sidecars, under the pods' Pod Security Standard.
func desiredInitContainers(app *webappv2.WebApp) ([]*corev1ac.ContainerApplyConfiguration, error) {
	var out []*corev1ac.ContainerApplyConfiguration
	var errs []error
	for _, x := range app.Spec.Pod.InitContainers {
		c := corev1ac.Container().
			WithName(x.Name).
			WithImage(x.Image).
			WithSecurityContext(containerSecurityContext(app))
		withProcess(c, x.Command, x.Args, x.ImagePullPolicy)
		if x.RestartPolicy != "" {
			c.WithRestartPolicy(x.RestartPolicy)
		}
		for i := range x.Env {
			env := ServerFormEnv(x.Env[i])
			errs = append(errs, convert(&env, func(ac *corev1ac.EnvVarApplyConfiguration) { c.WithEnv(ac) }))
		}
		if r := x.Resources; len(r.Requests) > 0 || len(r.Limits) > 0 {
			r = ServerFormResources(r)
			errs = append(errs, convert(&r, func(ac *corev1ac.ResourceRequirementsApplyConfiguration) { c.WithResources(ac) }))
		}
		if x.ReadinessProbe != nil {
			errs = append(errs, convert(x.ReadinessProbe, func(ac *corev1ac.ProbeApplyConfiguration) { c.WithReadinessProbe(ac) }))
		}
		c.WithVolumeMounts(volumeMounts(x.VolumeMounts, nil)...)
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// drain is the app container's preStop sleep (nil without a drain period): the kubelet sleeps itself, so the image
// needs no shell.
func drain(app *webappv2.WebApp) *corev1ac.LifecycleApplyConfiguration {
	s := app.Spec.Container.DrainSeconds
	if s == 0 {
		return nil
	}
	return corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().WithSleep(corev1ac.SleepAction().WithSeconds(int64(s))))
}
