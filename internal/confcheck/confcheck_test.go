package confcheck

import (
	"errors"
	"testing"
)

var errConfig = errors.New("invalid config")

type config struct {
	DB        any               `required:"true"`
	Name      string            `required:"true"`
	Providers map[string]string `required:"true"`
	Optional  string
}

func TestRequired(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{config{DB: 1, Name: "n", Providers: map[string]string{"a": "b"}}, ""},
		{config{Name: "n", Providers: map[string]string{"a": "b"}}, "invalid config: DB is required"},
		{config{DB: 1, Providers: map[string]string{}}, "invalid config: Name and Providers are required"},
		{config{}, "invalid config: DB, Name and Providers are required"},
	} {
		err := Required(errConfig, &c.cfg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want nil", c.cfg, err)
		case c.want != "" && (err == nil || err.Error() != c.want || !errors.Is(err, errConfig)):
			t.Errorf("%+v: %v, want %q wrapping the sentinel", c.cfg, err, c.want)
		}
	}
}
