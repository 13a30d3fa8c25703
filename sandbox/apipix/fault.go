package apipix

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// withFault applies sandbox/fault's faults, answering failures with 503
// ServicoIndisponivel, the one server error every operation defines
// (fault.Apply answers 500, which API Pix does not list).
func (s *Server) withFault(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		spec, err := s.faultFor(r)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "RequisicaoInvalida", "Requisição inválida.", err.Error())
			return
		}
		if spec.IsZero() {
			next(w, r)
			return
		}
		if spec.Delay > 0 && !sleep(r, spec.Delay) {
			return
		}
		if spec.FailBefore {
			unavailable(w)
			return
		}
		buf := &buffer{header: http.Header{}}
		next(buf, r)
		switch {
		case spec.DropAfter:
			panic(http.ErrAbortHandler) // executed; the client sees the connection drop
		case spec.FailAfter:
			unavailable(w)
			return
		}
		if !sleep(r, spec.Slow) {
			return
		}
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(buf.body.Len()))
		w.WriteHeader(buf.status)
		w.Write(buf.body.Bytes()) //nolint:errcheck
	}
}

func (s *Server) faultFor(r *http.Request) (fault.Spec, error) {
	if v := r.Header.Values(fault.Header); len(v) > 0 {
		return fault.Parse(strings.Join(v, ","))
	}
	if s.cfg.Fault.IsZero() || r.Method != http.MethodPut {
		return fault.Spec{}, nil
	}
	if rate := s.cfg.FaultRate; rate > 0 && rate < 1 && rand.Float64() >= rate {
		return fault.Spec{}, nil
	}
	return s.cfg.Fault, nil
}

func unavailable(w http.ResponseWriter) {
	writeProblem(w, http.StatusServiceUnavailable, "ServicoIndisponivel", "Serviço Indisponível",
		"Serviço não está disponível no momento. Serviço solicitado pode estar em manutenção ou fora da janela de funcionamento.")
}

func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffer) Header() http.Header { return b.header }

func (b *buffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
