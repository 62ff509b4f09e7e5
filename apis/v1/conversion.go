package v1

import (
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/example/webapp-operator/apis/v2"
)

// ConversionDataAnnotation keeps, on a WebApp read as v1, what its v2 spec says that v1 cannot (an unset replica
// count, more than one port or a port name other than http, autoscaling). Converting back to v2 restores it and removes the
// annotation, so a v1 client that reads, changes and writes a WebApp never loses a v2-only field. The key is
// reserved: a value set by hand is replaced on the next conversion.
const ConversionDataAnnotation = "webapp.example.com/conversion-data"

// v1PortName is the name v1's one port has in the Deployment and the Service.
const v1PortName = "http"

// conversionData is the annotation's content: only what v1 cannot express.
type conversionData struct {
	// ReplicasUnset: spec.replicas was unset in v2 (v1 shows 1, what unset means).
	ReplicasUnset bool `json:"replicasUnset,omitempty"`
	// Ports: v2's whole list of ports, when v1's one port cannot say it. v1's port is the first port's number.
	Ports []v2.Port `json:"ports,omitempty"`
	// Autoscaling: v2's spec.autoscaling, which v1 has no field for.
	Autoscaling *v2.Autoscaling `json:"autoscaling,omitempty"`
	// Expose: v2's spec.expose, which v1 has no field for.
	Expose *v2.Expose `json:"expose,omitempty"`
}

// ConvertToHub converts a v1 WebApp to v2. It never fails: an annotation it cannot read is dropped (it was set by
// hand; the object's v1 fields are converted as they are).
func ConvertToHub(src *WebApp, dst *v2.WebApp) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var data conversionData
	if raw, ok := dst.Annotations[ConversionDataAnnotation]; ok {
		if json.Unmarshal([]byte(raw), &data) != nil {
			data = conversionData{}
		}
		dropAnnotation(&dst.ObjectMeta)
	}

	s := src.Spec.DeepCopy()
	dst.Spec = v2.WebAppSpec{
		Image: s.Image,
		Container: v2.ContainerSpec{
			Command:         s.Command,
			Args:            s.Args,
			Env:             s.Env,
			EnvFrom:         s.EnvFrom,
			Resources:       s.Resources,
			ImagePullPolicy: s.ImagePullPolicy,
			HealthCheckPath: s.HealthCheckPath,
			ReadinessProbe:  s.ReadinessProbe,
			LivenessProbe:   s.LivenessProbe,
		},
		Pod: v2.PodSpec{
			Labels:           s.PodLabels,
			Annotations:      s.PodAnnotations,
			ImagePullSecrets: s.ImagePullSecrets,
			Security:         v2.PodSecurity(s.PodSecurity),
		},
		Rollout: v2.RolloutSpec{
			MaxSurge:                s.Strategy.MaxSurge,
			MaxUnavailable:          s.Strategy.MaxUnavailable,
			RevisionHistoryLimit:    s.RevisionHistoryLimit,
			ProgressDeadlineSeconds: s.ProgressDeadlineSeconds,
		},
		Service:        v2.ServiceSpec{Type: s.Service.Type, Annotations: s.Service.Annotations},
		DeletionPolicy: v2.DeletionPolicy(s.DeletionPolicy),
	}
	// Unset stays unset while v1 shows the default it stands for; any other count is the v1 client's.
	if s.Replicas != 0 && (!data.ReplicasUnset || s.Replicas != v2.DefaultReplicas) {
		dst.Spec.Replicas = &s.Replicas
	}
	// The v1 port is the primary port's number; the rest of the list comes back from the annotation.
	switch {
	case len(data.Ports) > 0:
		dst.Spec.Ports = restorePorts(data.Ports, s.Port)
	case s.Port != 0:
		dst.Spec.Ports = []v2.Port{{Name: v1PortName, Port: s.Port}}
	}

	// Autoscaling comes back as v2 accepts it only (the annotation can be set by hand in v1).
	if a := data.Autoscaling; a != nil && a.MaxReplicas >= 1 && (a.MinReplicas == nil || (*a.MinReplicas >= 1 && *a.MinReplicas <= a.MaxReplicas)) {
		dst.Spec.Autoscaling = a
	}
	if e := data.Expose; e != nil && len(e.Hosts) > 0 && (e.Gateway == nil) != (e.Ingress == nil) && (e.TLS == nil || e.Ingress != nil) {
		dst.Spec.Expose = e
	}

	dst.Status = statusToHub(src.Status)
	return nil
}

// restorePorts is the annotation's ports with v1's port as the primary port's number, kept to what v2 accepts: a
// port that repeats a name, or the number of a port before it, is left out. That happens only when a v1 client
// gives the primary port the number of another port, or sets the annotation by hand; the v1 client's own port wins.
func restorePorts(ports []v2.Port, primary int32) []v2.Port {
	out := make([]v2.Port, 0, len(ports))
	names, numbers := map[string]bool{}, map[int32]bool{}
	for i, p := range ports {
		if i == 0 && primary != 0 {
			p.Port = primary
		}
		if p.Name == "" || p.Port < 1 || names[p.Name] || numbers[p.Port] {
			continue
		}
		names[p.Name], numbers[p.Port] = true, true
		out = append(out, p)
	}
	return out
}

// ConvertFromHub converts a v2 WebApp to v1, keeping what v1 cannot express in ConversionDataAnnotation (and
// only then: a WebApp v1 can say whole carries no annotation).
func ConvertFromHub(src *v2.WebApp, dst *WebApp) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dropAnnotation(&dst.ObjectMeta)

	s := src.Spec.DeepCopy()
	dst.Spec = WebAppSpec{
		Image:                   s.Image,
		Replicas:                v2.DefaultReplicas,
		ProgressDeadlineSeconds: s.Rollout.ProgressDeadlineSeconds,
		DeletionPolicy:          DeletionPolicy(s.DeletionPolicy),
		Command:                 s.Container.Command,
		Args:                    s.Container.Args,
		Env:                     s.Container.Env,
		EnvFrom:                 s.Container.EnvFrom,
		Resources:               s.Container.Resources,
		HealthCheckPath:         s.Container.HealthCheckPath,
		ReadinessProbe:          s.Container.ReadinessProbe,
		LivenessProbe:           s.Container.LivenessProbe,
		ImagePullSecrets:        s.Pod.ImagePullSecrets,
		ImagePullPolicy:         s.Container.ImagePullPolicy,
		Service:                 ServiceSpec{Type: s.Service.Type, Annotations: s.Service.Annotations},
		PodLabels:               s.Pod.Labels,
		PodAnnotations:          s.Pod.Annotations,
		Strategy:                RollingUpdate{MaxSurge: s.Rollout.MaxSurge, MaxUnavailable: s.Rollout.MaxUnavailable},
		RevisionHistoryLimit:    s.Rollout.RevisionHistoryLimit,
		PodSecurity:             PodSecurity(s.Pod.Security),
	}
	var data conversionData
	// v1 has no unset count: it shows 1, what unset means, so a v1 reader (the operator before v2 included) runs
	// one pod, never zero.
	if s.Replicas != nil {
		dst.Spec.Replicas = *s.Replicas
	} else {
		data.ReplicasUnset = true
	}
	if len(s.Ports) > 0 {
		dst.Spec.Port = s.Ports[0].Port
		if len(s.Ports) > 1 || s.Ports[0].Name != v1PortName {
			data.Ports = s.Ports
		}
	}
	data.Autoscaling, data.Expose = s.Autoscaling, s.Expose
	if data.ReplicasUnset || len(data.Ports) > 0 || data.Autoscaling != nil || data.Expose != nil {
		raw, err := json.Marshal(data)
		if err != nil {
			return err
		}
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[ConversionDataAnnotation] = string(raw)
	}

	dst.Status = statusFromHub(src.Status)
	return nil
}

// dropAnnotation removes the conversion data, and the map with it when nothing else is left.
func dropAnnotation(m *metav1.ObjectMeta) {
	if _, ok := m.Annotations[ConversionDataAnnotation]; !ok {
		return
	}
	delete(m.Annotations, ConversionDataAnnotation)
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
}

// The status is the same in both versions.
func statusToHub(s WebAppStatus) v2.WebAppStatus {
	out := v2.WebAppStatus{
		ObservedGeneration: s.ObservedGeneration,
		Replicas:           s.Replicas,
		AvailableReplicas:  s.AvailableReplicas,
		DesiredReplicas:    s.DesiredReplicas,
		ReplicasSetBy:      s.ReplicasSetBy,
		Selector:           s.Selector,
		URL:                s.URL,
		URLs:               slices.Clone(s.URLs),
	}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, *c.DeepCopy())
	}
	for _, f := range s.RetainedFields {
		out.RetainedFields = append(out.RetainedFields, v2.RetainedField{Kind: f.Kind, Field: f.Field, Managers: append([]string(nil), f.Managers...)})
	}
	return out
}

func statusFromHub(s v2.WebAppStatus) WebAppStatus {
	out := WebAppStatus{
		ObservedGeneration: s.ObservedGeneration,
		Replicas:           s.Replicas,
		AvailableReplicas:  s.AvailableReplicas,
		DesiredReplicas:    s.DesiredReplicas,
		ReplicasSetBy:      s.ReplicasSetBy,
		Selector:           s.Selector,
		URL:                s.URL,
		URLs:               slices.Clone(s.URLs),
	}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, *c.DeepCopy())
	}
	for _, f := range s.RetainedFields {
		out.RetainedFields = append(out.RetainedFields, RetainedField{Kind: f.Kind, Field: f.Field, Managers: append([]string(nil), f.Managers...)})
	}
	return out
}
