// Package conversion is the seam between the WebApp API's versions: the conversion of v1 to and from the v2 hub
// (convert.go) and the rules of the conversion data (held to v2's schema: schema.go), the conversion webhook and its
// certificates (webhook.go, and local.go for a manager run outside the cluster), and the storage migration
// (migrate.go). The reconciler does not import it.
package conversion

import (
	"encoding/json"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// LegacyDataAnnotation is where releases before this one kept the conversion data, on the v1 object. It is read
// only where a v1 object has no conversion data in its status, which every v1 form of a stored v2 WebApp has (see
// FromHub): a v1 create (the server clears the status), as from an export of such a release, or an object still
// stored at v1 (by a rollback, or from before v2). It is held to v2's schema like any conversion data, and never
// stored by a v1 write: the conversion to v2 removes it.
const LegacyDataAnnotation = "webapp.example.com/conversion-data"

// noData is the conversion data of a WebApp that v1 says whole (FromHub writes it: see there).
const noData = "{}"

// v1PortName is the name v1's one port has in the Deployment and the Service.
const v1PortName = "http"

// data is what v1 cannot say of a v2 spec, kept in the v1 status's conversionData (see webappv1.WebAppStatus).
type data struct {
	// Unset names the v2 fields that were unset where v1 shows its default (the v1 field names: replicas,
	// podSecurity, progressDeadlineSeconds, service.type). They stay unset while v1 still shows that default.
	Unset []string `json:"unset,omitempty"`
	// ReplicasUnset is the legacy annotation's way of saying that Unset holds replicas.
	ReplicasUnset bool `json:"replicasUnset,omitempty"`
	// Ports: v2's whole list of ports, when v1's one port cannot say it. v1's port is the first port's number.
	Ports []webappv2.Port `json:"ports,omitempty"`
	// Autoscaling: v2's spec.autoscaling, which v1 has no field for.
	Autoscaling *webappv2.Autoscaling `json:"autoscaling,omitempty"`
	// Expose: v2's spec.expose, which v1 has no field for.
	Expose *webappv2.Expose `json:"expose,omitempty"`
	// Spec holds the other v2 fields v1 has none for (v2Fields), and nothing else.
	Spec *webappv2.WebAppSpec `json:"spec,omitempty"`
}

// v2Field is a field of the v2 spec that v1 has no field for, kept whole in the conversion data's spec: ptr points
// at it in a spec. The order is the order ToHub restores them in: a field that a rule relates to another comes
// after it (volumes before the mounts that name them, the grace period before the drain that must fit in it).
type v2Field struct {
	path string
	ptr  func(*webappv2.WebAppSpec) any
}

var v2Fields = []v2Field{
	{"spec.volumes", func(s *webappv2.WebAppSpec) any { return &s.Volumes }},
	{"spec.pod.terminationGracePeriodSeconds", func(s *webappv2.WebAppSpec) any { return &s.Pod.TerminationGracePeriodSeconds }},
	{"spec.container.volumeMounts", func(s *webappv2.WebAppSpec) any { return &s.Container.VolumeMounts }},
	{"spec.container.readOnlyRootFilesystem", func(s *webappv2.WebAppSpec) any { return &s.Container.ReadOnlyRootFilesystem }},
	{"spec.container.writablePaths", func(s *webappv2.WebAppSpec) any { return &s.Container.WritablePaths }},
	{"spec.container.startupProbe", func(s *webappv2.WebAppSpec) any { return &s.Container.StartupProbe }},
	{"spec.container.drainSeconds", func(s *webappv2.WebAppSpec) any { return &s.Container.DrainSeconds }},
	{"spec.pod.serviceAccountName", func(s *webappv2.WebAppSpec) any { return &s.Pod.ServiceAccountName }},
	{"spec.pod.automountServiceAccountToken", func(s *webappv2.WebAppSpec) any { return &s.Pod.AutomountServiceAccountToken }},
	{"spec.pod.nodeSelector", func(s *webappv2.WebAppSpec) any { return &s.Pod.NodeSelector }},
	{"spec.pod.tolerations", func(s *webappv2.WebAppSpec) any { return &s.Pod.Tolerations }},
	{"spec.pod.affinity", func(s *webappv2.WebAppSpec) any { return &s.Pod.Affinity }},
	{"spec.pod.spread", func(s *webappv2.WebAppSpec) any { return &s.Pod.Spread }},
	{"spec.pod.topologySpreadConstraints", func(s *webappv2.WebAppSpec) any { return &s.Pod.TopologySpreadConstraints }},
	{"spec.pod.priorityClassName", func(s *webappv2.WebAppSpec) any { return &s.Pod.PriorityClassName }},
	{"spec.pod.initContainers", func(s *webappv2.WebAppSpec) any { return &s.Pod.InitContainers }},
	{"spec.rollout.canary", func(s *webappv2.WebAppSpec) any { return &s.Rollout.Canary }},
}

// v2FieldOf is the v2-only field of path (nil: not one).
func v2FieldOf(path string) *v2Field {
	for i := range v2Fields {
		if v2Fields[i].path == path {
			return &v2Fields[i]
		}
	}
	return nil
}

// isSet says whether f is set (not its zero value) in s.
func (f v2Field) isSet(s *webappv2.WebAppSpec) bool {
	return !reflect.ValueOf(f.ptr(s)).Elem().IsZero()
}

// copyField sets f in dst to its value in src (a deep copy: the two specs share nothing).
func (f v2Field) copyField(dst, src *webappv2.WebAppSpec) {
	v := reflect.ValueOf(f.ptr(src.DeepCopy())).Elem()
	reflect.ValueOf(f.ptr(dst)).Elem().Set(v)
}

// clear sets f in s to its zero value.
func (f v2Field) clear(s *webappv2.WebAppSpec) {
	e := reflect.ValueOf(f.ptr(s)).Elem()
	e.Set(reflect.Zero(e.Type()))
}

// v1Default is a v1 field with a schema default whose v2 field has none. A v2 WebApp that leaves it unset reads in
// v1 with the default, set by the conversion itself: the API server fills in the defaults of the version it stores,
// not of the one it converts to, so a v1 client would otherwise read the field unset, and its next write (which the
// server defaults in v1) would set it, bump the generation and give the writer's field manager the field. A v1 write
// that still carries the default leaves it unset in v2.
type v1Default struct {
	name    string
	isUnset func(*webappv2.WebAppSpec) bool
	isV1Def func(*webappv1.WebAppSpec) bool
	unset   func(*webappv2.WebAppSpec)
	setV1   func(*webappv1.WebAppSpec)
}

var v1Defaults = []v1Default{
	{"replicas",
		func(s *webappv2.WebAppSpec) bool { return s.Replicas == nil },
		func(s *webappv1.WebAppSpec) bool { return s.Replicas == webappv2.DefaultReplicas || s.Replicas == 0 },
		func(s *webappv2.WebAppSpec) { s.Replicas = nil },
		func(s *webappv1.WebAppSpec) { s.Replicas = webappv2.DefaultReplicas }},
	{"podSecurity",
		func(s *webappv2.WebAppSpec) bool { return s.Pod.Security == "" },
		func(s *webappv1.WebAppSpec) bool {
			return s.PodSecurity == webappv1.PodSecurityRestricted || s.PodSecurity == ""
		},
		func(s *webappv2.WebAppSpec) { s.Pod.Security = "" },
		func(s *webappv1.WebAppSpec) { s.PodSecurity = webappv1.PodSecurityRestricted }},
	{"progressDeadlineSeconds",
		func(s *webappv2.WebAppSpec) bool { return s.Rollout.ProgressDeadlineSeconds == 0 },
		func(s *webappv1.WebAppSpec) bool {
			return s.ProgressDeadlineSeconds == webappv2.DefaultProgressDeadlineSeconds || s.ProgressDeadlineSeconds == 0
		},
		func(s *webappv2.WebAppSpec) { s.Rollout.ProgressDeadlineSeconds = 0 },
		func(s *webappv1.WebAppSpec) { s.ProgressDeadlineSeconds = webappv2.DefaultProgressDeadlineSeconds }},
	{"service.type",
		func(s *webappv2.WebAppSpec) bool { return s.Service.Type == "" },
		func(s *webappv1.WebAppSpec) bool {
			return s.Service.Type == corev1.ServiceTypeClusterIP || s.Service.Type == ""
		},
		func(s *webappv2.WebAppSpec) { s.Service.Type = "" },
		// The server defaults service.type only where service is there (a v1 object without it has none).
		func(s *webappv1.WebAppSpec) {
			if len(s.Service.Annotations) > 0 {
				s.Service.Type = corev1.ServiceTypeClusterIP
			}
		}},
}

// readData is the conversion data of a v1 object: its status's, or, where it has none, the legacy annotation's.
// Data that cannot be read is none (it was written by hand).
func readData(src *webappv1.WebApp) data {
	raw := src.Status.ConversionData
	if raw == "" {
		raw = src.Annotations[LegacyDataAnnotation]
	}
	var d data
	if raw == "" || json.Unmarshal([]byte(raw), &d) != nil {
		return data{}
	}
	if d.ReplicasUnset && !slices.Contains(d.Unset, "replicas") {
		d.Unset = append(d.Unset, "replicas")
	}
	return d
}

// toHub converts a v1 WebApp to v2, restoring what the conversion data says v1 cannot, kept to the shape v2
// needs (ports without repeats); whether the restored fields pass v2's whole schema is Guard's to say. restored
// names the v2 fields that came from the data, for Guard to drop if v2 refuses them. It never fails.
func toHub(src *webappv1.WebApp, dst *webappv2.WebApp) (restored []string) {
	d := readData(src)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dropAnnotation(&dst.ObjectMeta)

	s := src.Spec.DeepCopy()
	dst.Spec = webappv2.WebAppSpec{
		Image: s.Image,
		Container: webappv2.ContainerSpec{
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
		Pod: webappv2.PodSpec{
			Labels:           s.PodLabels,
			Annotations:      s.PodAnnotations,
			ImagePullSecrets: s.ImagePullSecrets,
			Security:         webappv2.PodSecurity(s.PodSecurity),
		},
		Rollout: webappv2.RolloutSpec{
			MaxSurge:                s.Strategy.MaxSurge,
			MaxUnavailable:          s.Strategy.MaxUnavailable,
			RevisionHistoryLimit:    s.RevisionHistoryLimit,
			ProgressDeadlineSeconds: s.ProgressDeadlineSeconds,
		},
		Service:        webappv2.ServiceSpec{Type: s.Service.Type, Annotations: s.Service.Annotations},
		DeletionPolicy: webappv2.DeletionPolicy(s.DeletionPolicy),
	}
	if s.Replicas != 0 {
		dst.Spec.Replicas = &s.Replicas
	}
	// A field unset in v2 stays unset while v1 shows the default it stands for; any other value is the v1 client's.
	for _, f := range v1Defaults {
		if slices.Contains(d.Unset, f.name) && f.isV1Def(s) {
			f.unset(&dst.Spec)
		}
	}
	// The v1 port is the primary port's number; the rest of the list comes back from the data.
	switch {
	case len(d.Ports) > 0:
		dst.Spec.Ports = restorePorts(d.Ports, s.Port)
		restored = append(restored, "spec.ports")
	case s.Port != 0:
		dst.Spec.Ports = []webappv2.Port{{Name: v1PortName, Port: s.Port}}
	}
	if d.Autoscaling != nil {
		dst.Spec.Autoscaling = d.Autoscaling
		restored = append(restored, "spec.autoscaling")
	}
	if d.Expose != nil {
		dst.Spec.Expose = d.Expose
		restored = append(restored, "spec.expose")
	}
	if d.Spec != nil {
		for _, f := range v2Fields {
			if f.isSet(d.Spec) {
				f.copyField(&dst.Spec, d.Spec)
				restored = append(restored, f.path)
			}
		}
	}

	dst.Status = statusToHub(src.Status)
	// What a previous write dropped is not this write's: Guard says what this one drops.
	dst.Status.ConversionDropped = nil
	return restored
}

// unrestore puts back what v1 alone says for a restored field that v2 refuses.
func unrestore(field string, src *webappv1.WebApp, dst *webappv2.WebApp) {
	switch field {
	case "spec.ports":
		dst.Spec.Ports = nil
		if src.Spec.Port != 0 {
			dst.Spec.Ports = []webappv2.Port{{Name: v1PortName, Port: src.Spec.Port}}
		}
	case "spec.autoscaling":
		dst.Spec.Autoscaling = nil
	case "spec.expose":
		dst.Spec.Expose = nil
	default:
		if f := v2FieldOf(field); f != nil {
			f.clear(&dst.Spec)
		}
	}
}

// restore copies a restored field from the object with every restored field to dst.
func restore(field string, from, dst *webappv2.WebApp) {
	switch field {
	case "spec.ports":
		dst.Spec.Ports = from.Spec.Ports
	case "spec.autoscaling":
		dst.Spec.Autoscaling = from.Spec.Autoscaling
	case "spec.expose":
		dst.Spec.Expose = from.Spec.Expose
	default:
		if f := v2FieldOf(field); f != nil {
			f.copyField(&dst.Spec, &from.Spec)
		}
	}
}

// restorePorts is the data's ports with v1's port as the primary port's number. A port that repeats a name, or the
// number of a port before it, is left out: that happens when a v1 client gives the primary port the number of
// another port (the v1 client's own port wins), or when the data was written by hand.
func restorePorts(ports []webappv2.Port, primary int32) []webappv2.Port {
	out := make([]webappv2.Port, 0, len(ports))
	names, numbers := map[string]bool{}, map[int32]bool{}
	for i, p := range ports {
		if i == 0 && primary != 0 {
			p.Port = primary
		}
		if names[p.Name] || numbers[p.Port] {
			continue
		}
		names[p.Name], numbers[p.Port] = true, true
		out = append(out, p)
	}
	return out
}

// FromHub converts a v2 WebApp to v1, keeping what v1 cannot express in the v1 status's conversionData. It writes
// conversionData always ("{}" for a WebApp v1 can say whole): a v1 write of a stored WebApp then carries the data
// of the object as stored, and a legacy annotation it sends is ignored.
func FromHub(src *webappv2.WebApp, dst *webappv1.WebApp) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dropAnnotation(&dst.ObjectMeta)

	s := src.Spec.DeepCopy()
	dst.Spec = webappv1.WebAppSpec{
		Image:                   s.Image,
		ProgressDeadlineSeconds: s.Rollout.ProgressDeadlineSeconds,
		DeletionPolicy:          webappv1.DeletionPolicy(s.DeletionPolicy),
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
		Service:                 webappv1.ServiceSpec{Type: s.Service.Type, Annotations: s.Service.Annotations},
		PodLabels:               s.Pod.Labels,
		PodAnnotations:          s.Pod.Annotations,
		Strategy:                webappv1.RollingUpdate{MaxSurge: s.Rollout.MaxSurge, MaxUnavailable: s.Rollout.MaxUnavailable},
		RevisionHistoryLimit:    s.Rollout.RevisionHistoryLimit,
		PodSecurity:             webappv1.PodSecurity(s.Pod.Security),
	}
	var d data
	// v1 has no unset count: it shows 1, what unset means, so a v1 reader (the operator before v2 included) runs
	// one pod, never zero; so for v1's other defaults.
	if s.Replicas != nil {
		dst.Spec.Replicas = *s.Replicas
	}
	for _, f := range v1Defaults {
		if f.isUnset(s) {
			d.Unset = append(d.Unset, f.name)
			f.setV1(&dst.Spec)
		}
	}
	if len(s.Ports) > 0 {
		dst.Spec.Port = s.Ports[0].Port
		if len(s.Ports) > 1 || s.Ports[0].Name != v1PortName {
			d.Ports = s.Ports
		}
	}
	d.Autoscaling, d.Expose = s.Autoscaling, s.Expose
	for _, f := range v2Fields {
		if f.isSet(s) {
			if d.Spec == nil {
				d.Spec = &webappv2.WebAppSpec{}
			}
			f.copyField(d.Spec, s)
		}
	}

	dst.Status = statusFromHub(src.Status)
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	dst.Status.ConversionData = string(raw)
	return nil
}

// dropAnnotation removes the legacy conversion data, and the map with it when nothing else is left.
func dropAnnotation(m *metav1.ObjectMeta) {
	if _, ok := m.Annotations[LegacyDataAnnotation]; !ok {
		return
	}
	delete(m.Annotations, LegacyDataAnnotation)
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
}

// The status is the same in both versions, but for v1's conversion data.
func statusToHub(s webappv1.WebAppStatus) webappv2.WebAppStatus {
	out := webappv2.WebAppStatus{
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
		out.RetainedFields = append(out.RetainedFields, webappv2.RetainedField{Kind: f.Kind, Field: f.Field, Managers: slices.Clone(f.Managers)})
	}
	if d := s.ConversionDropped; d != nil {
		out.ConversionDropped = &webappv2.ConversionDropped{Generation: d.Generation, Fields: slices.Clone(d.Fields), Message: d.Message}
	}
	if c := s.Canary; c != nil {
		out.Canary = &webappv2.CanaryStatus{Phase: c.Phase, StableRevision: c.StableRevision, CanaryRevision: c.CanaryRevision,
			FailedRevision: c.FailedRevision, Step: c.Step, Weight: c.Weight, Strategy: c.Strategy, StepStartedAt: c.StepStartedAt.DeepCopy(), GateSince: c.GateSince.DeepCopy(), ActedOn: c.ActedOn, PreviousRevision: c.PreviousRevision, PreviousUntil: c.PreviousUntil.DeepCopy(),
			RetiringRevision: c.RetiringRevision, RetiringSince: c.RetiringSince.DeepCopy(), RetireSeconds: c.RetireSeconds, HeldReplicas: c.HeldReplicas, Reason: c.Reason, Message: c.Message}
		for _, f := range c.Failures {
			out.Canary.Failures = append(out.Canary.Failures, webappv2.CanaryCheckFailures{Name: f.Name, Count: f.Count})
		}
		for _, e := range c.Checks {
			out.Canary.Checks = append(out.Canary.Checks, webappv2.CanaryCheckStatus(*e.DeepCopy()))
		}
	}
	return out
}

func statusFromHub(s webappv2.WebAppStatus) webappv1.WebAppStatus {
	out := webappv1.WebAppStatus{
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
		out.RetainedFields = append(out.RetainedFields, webappv1.RetainedField{Kind: f.Kind, Field: f.Field, Managers: slices.Clone(f.Managers)})
	}
	if d := s.ConversionDropped; d != nil {
		out.ConversionDropped = &webappv1.ConversionDropped{Generation: d.Generation, Fields: slices.Clone(d.Fields), Message: d.Message}
	}
	if c := s.Canary; c != nil {
		out.Canary = &webappv1.CanaryStatus{Phase: c.Phase, StableRevision: c.StableRevision, CanaryRevision: c.CanaryRevision,
			FailedRevision: c.FailedRevision, Step: c.Step, Weight: c.Weight, Strategy: c.Strategy, StepStartedAt: c.StepStartedAt.DeepCopy(), GateSince: c.GateSince.DeepCopy(), ActedOn: c.ActedOn, PreviousRevision: c.PreviousRevision, PreviousUntil: c.PreviousUntil.DeepCopy(),
			RetiringRevision: c.RetiringRevision, RetiringSince: c.RetiringSince.DeepCopy(), RetireSeconds: c.RetireSeconds, HeldReplicas: c.HeldReplicas, Reason: c.Reason, Message: c.Message}
		for _, f := range c.Failures {
			out.Canary.Failures = append(out.Canary.Failures, webappv1.CanaryCheckFailures{Name: f.Name, Count: f.Count})
		}
		for _, e := range c.Checks {
			out.Canary.Checks = append(out.Canary.Checks, webappv1.CanaryCheckStatus(*e.DeepCopy()))
		}
	}
	return out
}
