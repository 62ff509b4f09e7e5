package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the WebApp API.
	GroupVersion = schema.GroupVersion{Group: "example.com", Version: "v2"}

	// SchemeGroupVersion is GroupVersion under the name generated code (applyconfig/) expects.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
