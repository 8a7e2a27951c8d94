// The Feedback core's step loop and its backward in C++ (compiled.py builds and loads it).
//
// The same arithmetic as step.py's layer_forward / layer_backward and core.py's
// FeedbackRun._advance / _backward, op for op, but called from C++ below autograd: a step's
// ~170 tensor operations cost their ATen kernel, not a Python call, an autograd check and a
// dispatch each. Products go through ATen (BLAS); the tape is kept here, in C++, between the
// forward and the backward. Variants: pre- or post-norm, shared or per-layer key/value
// projections, dropout (bool masks drawn in Python, scaled here), the gated carry and the kept
// slot (their gates computed in Python for the whole call, taken here as inputs, their gradient
// handed back; the kept slot read after the window, its one slot in ATen around the loops); no
// persistent vectors (the Python path runs those). Any floating dtype ATen has (the caller sends
// float32 and float64).
//
// Letters: B envs, D model width, H heads, E head width, S span, F feed-forward width, L
// layers, G key/value groups, T steps of the call.

// ATen and torch's pybind11 casters, not <torch/extension.h>: that header brings the whole C++
// frontend (torch/all.h), which this file does not use, and doubles the build's compile time.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;
using at::Tensor;
using TensorList = std::vector<Tensor>;

// One layer's weights, field for field step.LayerWeights, and one key/value projection's,
// step.GroupWeights: Python builds them by keyword (LayerWeights(**weights._asdict())), so what
// crosses is matched by name, never by position. An absent weight (None) is an undefined Tensor.
struct LayerWeights {
  Tensor norm_attn_w, norm_attn_b, query_w, query_b, out_w, out_b, positions, persistent_k, persistent_v, norm_ff_w, norm_ff_b,
      fc1_w, fc1_b, fc2_w, fc2_b;
};

struct GroupWeights {
  Tensor norm_w, norm_b, kv_w, kv_b;
};

template <class T>
using Fields = std::vector<std::pair<const char*, Tensor T::*>>;

const Fields<LayerWeights> LAYER_WEIGHTS = {
    {"norm_attn_w", &LayerWeights::norm_attn_w}, {"norm_attn_b", &LayerWeights::norm_attn_b}, {"query_w", &LayerWeights::query_w},
    {"query_b", &LayerWeights::query_b}, {"out_w", &LayerWeights::out_w}, {"out_b", &LayerWeights::out_b},
    {"positions", &LayerWeights::positions}, {"persistent_k", &LayerWeights::persistent_k},
    {"persistent_v", &LayerWeights::persistent_v}, {"norm_ff_w", &LayerWeights::norm_ff_w}, {"norm_ff_b", &LayerWeights::norm_ff_b},
    {"fc1_w", &LayerWeights::fc1_w}, {"fc1_b", &LayerWeights::fc1_b}, {"fc2_w", &LayerWeights::fc2_w}, {"fc2_b", &LayerWeights::fc2_b},
};

const Fields<GroupWeights> GROUP_WEIGHTS = {
    {"norm_w", &GroupWeights::norm_w}, {"norm_b", &GroupWeights::norm_b}, {"kv_w", &GroupWeights::kv_w}, {"kv_b", &GroupWeights::kv_b},
};

// A T from keyword arguments, each field by its name: one missing, or one T has no field of,
// is a TypeError naming it.
template <class T>
T from_fields(const char* type, const Fields<T>& fields, const py::kwargs& given) {
  std::string names;
  for (const auto& field : fields) names += std::string(names.empty() ? "" : ", ") + field.first;
  for (const auto& item : given) {
    const auto key = py::cast<std::string>(item.first);
    if (std::none_of(fields.begin(), fields.end(), [&](const auto& field) { return key == field.first; }))
      throw py::type_error(std::string(type) + "() got an unknown field '" + key + "'; its fields are " + names);
  }
  T value;
  for (const auto& [name, member] : fields) {
    if (!given.contains(name)) throw py::type_error(std::string(type) + "() is missing the field '" + name + "'; its fields are " + names);
    const py::handle field = given[name];
    value.*member = field.is_none() ? Tensor() : py::cast<Tensor>(field);
  }
  return value;
}

template <class T>
void bind_fields(py::module_& m, const char* type, const Fields<T>& fields, const char* doc) {
  py::class_<T> bound(m, type, doc, py::module_local());
  bound.def(py::init([type, &fields](const py::kwargs& given) { return from_fields<T>(type, fields, given); }));
  for (const auto& [name, member] : fields) bound.def_readwrite(name, member);
}

namespace {

constexpr double EPS = 1e-5;  // nn.LayerNorm's default, as step.EPS

bool absent(const Tensor& t) { return !t.defined() || t.numel() == 0; }

struct Layer : LayerWeights {  // one layer's weights as the steps read them
  bool ff;  // a feed-forward sublayer (none with persistent vectors, which the compiled step does not run)
  Tensor positions_t;  // (E, S) contiguous, the window's rows: the attention loops run along the slots
  Tensor kept_position;  // (E,) with the kept slot: its row, positions' last (the reference's row 0); else undefined
};

// The layers' weights as the steps read them; with the kept slot (`kept`) each layer's positions
// hold S + 1 rows, the window's and then the kept slot's.
std::vector<Layer> layers_of(const std::vector<LayerWeights>& weights, bool kept) {
  std::vector<Layer> layers;
  for (const auto& w : weights) {
    TORCH_CHECK(absent(w.persistent_k) && absent(w.persistent_v), "the compiled Feedback step has no persistent vectors (step='python' runs them)");
    Tensor window = w.positions, kept_position;
    if (kept && !absent(w.positions)) {
      const int64_t span = w.positions.size(0) - 1;
      window = w.positions.narrow(0, 0, span);
      kept_position = w.positions[span];
    }
    layers.push_back({w, !absent(w.fc1_w), absent(window) ? window : window.t().contiguous(), kept_position});
  }
  return layers;
}

// The kept slot as one layer's step reads it (step.KeptRead): k_{t-1}'s keys and values (B, H, E)
// of the layer's key/value group and its bias (B, 1), 0 where k_{t-1} is the episode's and -inf
// where not; in a backward, accumulators (B, H, E) of its key and value gradients.
struct KeptRead {
  Tensor keys, values, bias, grad_keys, grad_values;
};

// What one layer's step keeps for its backward: the fields of step.LayerTape (a norm's
// statistics as mean and rstd), undefined where the variant has no such value.
struct LayerTape {
  Tensor h, mean_a, rstd_a, a, q, p, pd, c, z, mean_z, rstd_z, h_mid, f, mean_f, rstd_f, u, ud, z2, mean_z2, rstd_z2;
};

struct StepTape {
  std::vector<LayerTape> layers;
  Tensor m;  // (B, D) the step's memory vector
  Tensor u, carried;  // with the carry: u_t (B, D), the paper's m_t (tanh(u_t) with the tanh write), and c_t (B, 1), 1.0 where m_{t-1} was carried; else undefined
  TensorList mean, rstd;  // per group: its norm's statistics of m (pre-norm)
  // with the kept slot (else empty or undefined): what the layers read, k_{t-1} (B, D), per group
  // as keys, values and bias, with its norm's statistics; c_t k_{t-1} and c_t a_t (B, D) of the blend
  Tensor kept_read, kept_carried, kept_onward;
  std::vector<KeptRead> kept;
  TensorList kept_mean, kept_rstd;
};

// A long call's windows in overlapping blocks. The buffers hold each (env, head, element) row of
// keys and values across all their slots, S + T of them in a recording call: at T = 1,024 each
// row is some 4 KB from the next, and a step's window (S slots of every row) is scattered over
// the whole buffer, where at T = 32 it lies in one stretch of memory; reading it so cost the
// attention's loops 3-4x their time (benchmarks/long_window.py, its "wide" row). Block j holds
// slots [j S, j S + 2 S) of every row, rows 2 S long and next to each other, so that the window
// [lo, lo + S) lies whole in block lo / S: each slot is written into the two blocks that hold it,
// the windows are read from the blocks, and their gradients added into blocks of their own that
// are summed into the buffer's slots at the end.
struct Blocks {
  int64_t span = 0;
  TensorList keys, values;  // per group (blocks, B, H, E, 2 S): the buffer's keys and values, slot s in blocks s / S and s / S - 1

  bool empty() const { return keys.empty(); }

  // group g's keys or values (`blocks`) over the window [lo, lo + S): (B, H, E, S), rows 2 S apart
  Tensor window(const Tensor& blocks, int64_t lo) const {
    const int64_t j = lo / span;
    return blocks[j].narrow(-1, lo - j * span, span);
  }

  // x (..., n) into `blocks` at slots [slot, slot + n) of every block that holds them
  void write(const Tensor& blocks, int64_t slot, const Tensor& x) const {
    for (int64_t s = slot; s < slot + x.size(-1);) {
      const int64_t j = s / span, n = std::min(slot + x.size(-1) - s, (j + 1) * span - s);  // the slots [s, s + n) share block j
      for (int64_t b = std::max<int64_t>(0, j - 1); b <= std::min(j, blocks.size(0) - 1); ++b)
        blocks[b].narrow(-1, s - b * span, n).copy_(x.narrow(-1, s - slot, n));
      s += n;
    }
  }
};

// Blocks of a buffer of `capacity` slots (like: (B, H, E, capacity)), every slot of it held twice.
Tensor new_blocks(const Tensor& like, int64_t span) {
  const int64_t blocks = (like.size(-1) + span - 1) / span;
  return at::empty({blocks, like.size(0), like.size(1), like.size(2), 2 * span}, like.options());
}

}  // namespace

// A recording call's tape, held by Python between the forward and the backward.
struct Tape {
  std::vector<StepTape> steps;
  Blocks blocks;  // a long call's windows (empty unless its forward was told `blocked`)
};

namespace {

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& x, const Tensor& w, const Tensor& b) {
  return at::native_layer_norm(x, {x.size(-1)}, w, b, EPS);
}

// layer_norm backwards: the input's gradient; the weight's and bias's added into acc_w, acc_b.
Tensor layer_norm_grads(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w, const Tensor& b,
                        const Tensor& acc_w, const Tensor& acc_b) {
  auto [dx, dw, db] = at::native_layer_norm_backward(grad, x, {x.size(-1)}, mean, rstd, w, b, {true, true, true});
  acc_w.add_(dw);
  acc_b.add_(db);
  return dx;
}

Tensor layer_norm_input_grad(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w) {
  return std::get<0>(at::native_layer_norm_backward(grad, x, {x.size(-1)}, mean, rstd, w, Tensor(), {true, false, false}));
}

void linear_grads(const Tensor& grad, const Tensor& x, const Tensor& acc_w, const Tensor& acc_b) {
  acc_w.addmm_(grad.t(), x);
  acc_b.add_(grad.sum(0));
}

// A key/value group's projection of memory vectors x (B, D) (step.project), read through its norm
// where it has one (pre-norm, read_norm) -> keys and values (B, 2, H, E), the norm's mean and rstd
// (undefined without a norm).
std::tuple<Tensor, Tensor, Tensor> project(const GroupWeights& w, const Tensor& x, int64_t heads, int64_t head_width) {
  Tensor normed = x, mean, rstd;
  if (!absent(w.norm_w)) std::tie(normed, mean, rstd) = layer_norm(x, w.norm_w, w.norm_b);
  return {at::addmm(w.kv_b, normed, w.kv_w.t()).view({x.size(0), 2, heads, head_width}), mean, rstd};
}

// The attention's loops are built for three instruction sets and the best the CPU has is chosen
// when the module loads (GCC's target_clones: x86-64-v4 is AVX-512, v3 AVX2 with FMA): the
// build's own flags stay portable (a cache shared between machines never runs an instruction a
// CPU lacks), yet the loops run as wide as the machine allows, as ATen's own kernels do. With
// FMA a product and a sum round once, not twice: results differ from the Python step's in the
// last bits, as they do between CPUs.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define WIDEST_VECTORS __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WIDEST_VECTORS
#endif
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))  // compiled into each of its caller's clones, at their width
#else
#define ALWAYS_INLINE inline
#endif

// The sum of term(s) over slots [lo, hi) of a row, kept as one vector of partial sums (a cache
// line of lanes) added to along the row and summed once at its end. On rows of a window's length
// (S = 64) the value products ran so at the rate of reading the rows alone, 1.45x faster than
// with omp simd's own reduction, and the learning call's forward attention in 0.79-0.87 of its
// time (2-core AMD EPYC, one thread, docs/speed.md). The backward's query gradient keeps omp
// simd's reduction: summed so, its key-gradient rows written in a loop of their own first, that
// loop alone took 0.75 of its time, but the learning call's backward loops did not get faster.
template <class scalar_t, class Term>
ALWAYS_INLINE scalar_t row_sum(int64_t lo, int64_t hi, Term term) {
  constexpr int64_t lanes = 64 / sizeof(scalar_t);
  scalar_t part[lanes] = {};
  int64_t s = lo;
  for (; s + lanes <= hi; s += lanes) {
#pragma omp simd
    for (int64_t l = 0; l < lanes; ++l) part[l] += term(s + l);
  }
  scalar_t sum = 0;
  for (; s < hi; ++s) sum += term(s);
  for (int64_t l = 0; l < lanes; ++l) sum += part[l];
  return sum;
}

// Where one env's and head's rows lie: q, c, dq, dc at b * width + h * head_width; p, pd and ds
// at (b * heads + h) * n (n = S, or S + 1 where the kept slot follows the window); the windows (keys and values transposed, (E, S), and so their
// gradients) and the dropout mask at their own strides. Every loop over a window runs along its
// slots, contiguous, S long: no loop is as short as a head's width.
struct Window {
  int64_t batch, heads, span, head_width;
  int64_t n;  // the slots a row of scores, p, pd and ds holds: the window's S, then the kept slot's where read
  int64_t k0, k1, k2;  // k_t's strides: env, head, element (slots contiguous)
  int64_t v0, v1, v2;  // v_t's: env, head, element (slots contiguous)
  int64_t m0, m1, m2;  // the dropout mask's: env, head, slot
  int64_t g0, g1, g2;  // the key and value gradients' (keys' layout): env, head, element
};

// Scores q . (key + position) of every env's and head's visible slots, -inf before them;
// lo[b] the first visible slot of env b.
template <class scalar_t>
WIDEST_VECTORS void attend_scores(const Window& w, const scalar_t* qs, const scalar_t* ks, const scalar_t* pos, const int64_t* lo_of,
                                  scalar_t* ss) {
  const int64_t span = w.span, width = w.heads * w.head_width;
  for (int64_t b = 0; b < w.batch; ++b) {
    const int64_t lo = lo_of[b];
    for (int64_t h = 0; h < w.heads; ++h) {
      const scalar_t* qr = qs + b * width + h * w.head_width;
      const scalar_t* kr = ks + b * w.k0 + h * w.k1;
      scalar_t* sr = ss + (b * w.heads + h) * w.n;
      for (int64_t s = 0; s < lo; ++s) sr[s] = -std::numeric_limits<scalar_t>::infinity();
      for (int64_t s = lo; s < span; ++s) sr[s] = 0;
      for (int64_t e = 0; e < w.head_width; ++e) {
        const scalar_t qe = qr[e];
        const scalar_t *ke = kr + e * w.k2, *pe = pos + e * span;
#pragma omp simd
        for (int64_t s = lo; s < span; ++s) sr[s] += qe * (ke[s] + pe[s]);
      }
    }
  }
}

// The weights after dropout (pd, where a mask is given) and the context c_e = pd . v_e over the
// visible slots; the rows of envs that see nothing are zeroed (softmax of all -inf is NaN) and
// read nothing.
template <class scalar_t>
WIDEST_VECTORS void attend_values(const Window& w, const scalar_t* vs, const int64_t* lo_of, const bool* ms, scalar_t kept, scalar_t* ps,
                                  scalar_t* pds, scalar_t* cs) {
  const int64_t span = w.span, width = w.heads * w.head_width;
  for (int64_t b = 0; b < w.batch; ++b) {
    const int64_t lo = lo_of[b];
    for (int64_t h = 0; h < w.heads; ++h) {
      const int64_t row = (b * w.heads + h) * w.n;
      scalar_t* pr = ps + row;
      if (lo == span) {  // nothing seen (the kept slot neither: it is read while the window's newest slot is): the attention reads nothing
        std::fill(pr, pr + w.n, scalar_t(0));
        if (ms) std::fill(pds + row, pds + row + w.n, scalar_t(0));
        continue;
      }
      scalar_t* pdr = pr;
      if (ms) {
        pdr = pds + row;
        const bool* mr = ms + b * w.m0 + h * w.m1;
        for (int64_t s = 0; s < w.n; ++s) pdr[s] = mr[s * w.m2] ? pr[s] * kept : scalar_t(0);
      }
      const scalar_t* vr = vs + b * w.v0 + h * w.v1;
      scalar_t* cr = cs + b * width + h * w.head_width;
      for (int64_t e = 0; e < w.head_width; ++e) {
        const scalar_t* ve = vr + e * w.v2;
        cr[e] = row_sum<scalar_t>(lo, span, [&](int64_t s) { return pdr[s] * ve[s]; });
      }
    }
  }
}

// attend backwards for every env and head: dq and ds (the scores' gradient, through the softmax
// and dropout) written; the window's value and key gradients (gk, gv: keys' layout) added into.
template <class scalar_t>
WIDEST_VECTORS void attend_grads(const Window& w, const scalar_t* dcs, const scalar_t* ps, const scalar_t* pds, const scalar_t* qs,
                                 const scalar_t* ks, const scalar_t* vs, const scalar_t* pos, const bool* ms, scalar_t kept, const scalar_t* kept_dps,
                                 scalar_t* dqs, scalar_t* dss, scalar_t* gks, scalar_t* gvs, scalar_t* dp) {
  const int64_t span = w.span, width = w.heads * w.head_width;
  for (int64_t b = 0; b < w.batch; ++b) {
    for (int64_t h = 0; h < w.heads; ++h) {
      const int64_t row = (b * w.heads + h) * w.n;
      const scalar_t *pr = ps + row, *pdr = pds + row;
      const scalar_t *dcr = dcs + b * width + h * w.head_width, *qr = qs + b * width + h * w.head_width;
      const scalar_t* vr = vs + b * w.v0 + h * w.v1;
      const scalar_t* kr = ks + b * w.k0 + h * w.k1;
      scalar_t* gvr = gvs + b * w.g0 + h * w.g1;
      scalar_t* gkr = gks + b * w.g0 + h * w.g1;
      std::fill(dp, dp + w.n, scalar_t(0));
      if (kept_dps) dp[span] = kept_dps[b * w.heads + h];  // the kept slot's dc . v, made around the loops
      for (int64_t e = 0; e < w.head_width; ++e) {  // at the weights after dropout (dp_s = dc . v_s) and at the values (dc_e pd_s)
        const scalar_t* ve = vr + e * w.v2;
        scalar_t* g = gvr + e * w.g2;
        const scalar_t de = dcr[e];
#pragma omp simd
        for (int64_t s = 0; s < span; ++s) {
          dp[s] += de * ve[s];
          g[s] += de * pdr[s];
        }
      }
      if (ms) {
        const bool* mr = ms + b * w.m0 + h * w.m1;
        for (int64_t s = 0; s < w.n; ++s) dp[s] = mr[s * w.m2] ? dp[s] * kept : scalar_t(0);
      }
      scalar_t dot = 0;  // softmax backwards (p is 0 where not visible, and everywhere where nothing is)
#pragma omp simd reduction(+ : dot)
      for (int64_t s = 0; s < w.n; ++s) dot += dp[s] * pr[s];
      scalar_t* dsr = dss + row;
#pragma omp simd
      for (int64_t s = 0; s < w.n; ++s) dsr[s] = pr[s] * (dp[s] - dot);
      scalar_t* dqr = dqs + b * width + h * w.head_width;
      for (int64_t e = 0; e < w.head_width; ++e) {  // at the keys (q_e ds_s) and the query (ds . (k + position))
        scalar_t* g = gkr + e * w.g2;
        const scalar_t *ke = kr + e * w.k2, *pe = pos + e * span;
        const scalar_t qe = qr[e];
        scalar_t acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t s = 0; s < span; ++s) {
          g[s] += qe * dsr[s];
          acc += dsr[s] * (ke[s] + pe[s]);
        }
        dqr[e] = acc;
      }
    }
  }
}

// The window of k_t, v_t (B, H, E, S), rows of n read slots (S, or S + 1 with the kept slot), the
// mask (or undefined) and the gradients' grad_k_t (or undefined).
Window window_of(const Tensor& k_t, const Tensor& v_t, int64_t n, const Tensor& mask, const Tensor& grad_k_t = Tensor()) {
  const auto stride = [](const Tensor& t, int64_t d) { return t.defined() ? t.stride(d) : 0; };
  return {v_t.size(0), v_t.size(1), v_t.size(3), v_t.size(2), n, k_t.stride(0), k_t.stride(1), k_t.stride(2), v_t.stride(0), v_t.stride(1),
          v_t.stride(2), stride(mask, 0), stride(mask, 1), stride(mask, 2), stride(grad_k_t, 0), stride(grad_k_t, 1), stride(grad_k_t, 2)};
}

// The attention of one step, all envs and heads (the ATen path's position scores, mask bias, key
// scores, softmax, "seen", dropout and value product: seven operations): q (B, D) the scaled
// query; k_t, v_t (B, H, E, S) the window's keys and values, transposed; positions_t
// (E, S); slot s is visible where t + s >= episode_start[b] (buffer indices counted as the run
// does); mask (B, H, S [+ 1]) bool or undefined, kept entries scaled by `keep`; kept: the kept
// slot, read after the window at position row kept_position (E,), or null -> p (B, H, S [+ 1]) the
// attention weights (0 where not visible; all 0 where nothing is), pd (p after dropout, p itself
// without), c (B, D) the context.
std::tuple<Tensor, Tensor, Tensor> attend(const Tensor& q, const Tensor& k_t, const Tensor& v_t, const Tensor& positions_t,
                                          const Tensor& episode_start, int64_t t, const Tensor& mask, double keep, const KeptRead* kept,
                                          const Tensor& kept_position) {
  RECORD_FUNCTION("feedback::attend", std::vector<c10::IValue>());  // named in torch.profiler (benchmarks/feedback_compiled.py --profile)
  const Window w = window_of(k_t, v_t, v_t.size(3) + (kept != nullptr), mask);
  TORCH_CHECK(q.is_contiguous() && k_t.stride(3) == 1 && v_t.stride(3) == 1 && positions_t.is_contiguous(), "attend: unexpected layouts");
  Tensor scores = at::empty({w.batch, w.heads, w.n}, q.options()), c = at::zeros({w.batch, w.heads * w.head_width}, q.options());
  std::vector<int64_t> lo(w.batch);  // each env's first visible slot
  const int64_t* start = episode_start.data_ptr<int64_t>();
  for (int64_t b = 0; b < w.batch; ++b) lo[b] = std::min(w.span, std::max<int64_t>(0, start[b] - t));
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attend_scores", [&] {
    attend_scores<scalar_t>(w, q.data_ptr<scalar_t>(), k_t.data_ptr<scalar_t>(), positions_t.data_ptr<scalar_t>(), lo.data(),
                            scores.data_ptr<scalar_t>());
  });
  const Tensor rows = q.view({w.batch, w.heads, w.head_width});
  if (kept) scores.select(-1, w.span).copy_((rows * (kept->keys + kept_position)).sum(-1) + kept->bias);  // q . (k + position row), masked
  Tensor p = at::_softmax(scores, -1, false);  // (B, H, n); rows that see nothing are NaN until zeroed
  Tensor pd = mask.defined() ? at::empty_like(p) : p;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attend_values", [&] {
    attend_values<scalar_t>(w, v_t.data_ptr<scalar_t>(), lo.data(), mask.defined() ? mask.data_ptr<bool>() : nullptr,
                            static_cast<scalar_t>(keep), p.data_ptr<scalar_t>(), pd.data_ptr<scalar_t>(), c.data_ptr<scalar_t>());
  });
  if (kept) c.view({w.batch, w.heads, w.head_width}).addcmul_(pd.select(-1, w.span).unsqueeze(-1), kept->values);
  return {p, pd, c};
}

// attend backwards: dc (B, D) at the context; p, pd from the forward; q, k_t, v_t, positions, mask,
// keep, kept, kept_position as attend's -> dq (B, D) at the query and ds (B, H, S [+ 1]) at the
// scores; the window's value and key gradients added into grad_v_t and grad_k_t (B, H, E, S), the
// kept slot's into its grad_keys and grad_values.
std::tuple<Tensor, Tensor> attend_backward(const Tensor& dc, const Tensor& p, const Tensor& pd, const Tensor& q, const Tensor& k_t,
                                           const Tensor& v_t, const Tensor& positions_t, const Tensor& mask, double keep,
                                           const Tensor& grad_k_t, const Tensor& grad_v_t, const KeptRead* kept, const Tensor& kept_position) {
  RECORD_FUNCTION("feedback::attend_backward", std::vector<c10::IValue>());
  const Window w = window_of(k_t, v_t, p.size(-1), mask, grad_k_t);
  TORCH_CHECK(grad_k_t.strides() == grad_v_t.strides() && grad_k_t.stride(3) == 1 && dc.is_contiguous() && p.is_contiguous() &&
                  pd.is_contiguous() && q.is_contiguous() && k_t.stride(3) == 1 && v_t.stride(3) == 1,
              "attend_backward: unexpected layouts");
  Tensor dq = at::empty_like(q), ds = at::empty_like(p);
  const Tensor dc_rows = dc.view({w.batch, w.heads, w.head_width}), q_rows = q.view({w.batch, w.heads, w.head_width});
  Tensor kept_dp;  // (B, H): dc . v of the kept slot, the loops' dp at its entry
  if (kept) kept_dp = (dc_rows * kept->values).sum(-1).contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attend_backward", [&] {
    std::vector<scalar_t> dp(w.n);  // one row's gradient at the weights after dropout
    attend_grads<scalar_t>(w, dc.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), pd.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(),
                           k_t.data_ptr<scalar_t>(), v_t.data_ptr<scalar_t>(), positions_t.data_ptr<scalar_t>(),
                           mask.defined() ? mask.data_ptr<bool>() : nullptr, static_cast<scalar_t>(keep),
                           kept ? kept_dp.data_ptr<scalar_t>() : nullptr, dq.data_ptr<scalar_t>(), ds.data_ptr<scalar_t>(),
                           grad_k_t.data_ptr<scalar_t>(), grad_v_t.data_ptr<scalar_t>(), dp.data());
  });
  if (kept) {  // the kept slot's value (pd_k dc), key (ds_k q) and query (ds_k (k + position row)) gradients
    const Tensor ds_kept = ds.select(-1, w.span).unsqueeze(-1);  // (B, H, 1)
    kept->grad_values.addcmul_(pd.select(-1, w.span).unsqueeze(-1), dc_rows);
    kept->grad_keys.addcmul_(ds_kept, q_rows);
    dq.view({w.batch, w.heads, w.head_width}).addcmul_(ds_kept, kept->keys + kept_position);
  }
  return {dq, ds};
}

// One layer, one step (step.layer_forward): h (B, D); k_t, v_t (B, H, E, S) keys and values
// transposed; episode_start, t: which slots are visible (attend); mask_a (B, H, S [+ 1]) bool or
// undefined, kept entries scaled by `keep`; mask_r (B, F): the scaled ReLU mask or undefined;
// kept: the kept slot or null -> the layer output (B, D), its tape filled when `tape` is given.
Tensor layer_forward(const Tensor& h, const Tensor& k_t, const Tensor& v_t, const Tensor& episode_start, int64_t t, const Layer& w,
                     const Tensor& mask_a, double keep, const Tensor& mask_r, bool pre_norm, LayerTape* tape, const KeptRead* kept) {
  Tensor a = h, mean_a, rstd_a;
  if (pre_norm) std::tie(a, mean_a, rstd_a) = layer_norm(h, w.norm_attn_w, w.norm_attn_b);
  Tensor q = at::addmm(w.query_b, a, w.query_w.t());  // (B, D)
  auto [p, pd, c] = attend(q, k_t, v_t, w.positions_t, episode_start, t, mask_a, keep, kept, w.kept_position);
  Tensor z = at::addmm(w.out_b, c, w.out_w.t()) + h;
  Tensor h_mid = z, mean_z, rstd_z;
  if (!pre_norm) std::tie(h_mid, mean_z, rstd_z) = layer_norm(z, w.norm_attn_w, w.norm_attn_b);
  Tensor out = h_mid, f, mean_f, rstd_f, u, ud, z2, mean_z2, rstd_z2;
  if (w.ff) {
    f = h_mid;
    if (pre_norm) std::tie(f, mean_f, rstd_f) = layer_norm(h_mid, w.norm_ff_w, w.norm_ff_b);
    u = at::relu(at::addmm(w.fc1_b, f, w.fc1_w.t()));  // (B, F)
    ud = mask_r.defined() ? u * mask_r : u;
    out = z2 = at::addmm(w.fc2_b, ud, w.fc2_w.t()) + h_mid;
    if (!pre_norm) std::tie(out, mean_z2, rstd_z2) = layer_norm(z2, w.norm_ff_w, w.norm_ff_b);
  }
  if (tape) *tape = {h, mean_a, rstd_a, a, q, p, pd, c, z, mean_z, rstd_z, h_mid, f, mean_f, rstd_f, u, ud, z2, mean_z2, rstd_z2};
  return out;
}

// layer_forward backwards (step.layer_backward): grad (B, D) at the output -> at the
// input; k_t, v_t, mask_a, keep, mask_r, kept as layer_forward's; the window's key and value gradients
// added into grad_k_t, grad_v_t (B, H, E, S), the kept slot's into its accumulators, the weights' into acc.
Tensor layer_backward(const Tensor& grad, const Tensor& k_t, const Tensor& v_t, const Tensor& grad_k_t, const Tensor& grad_v_t,
                      const Layer& w, const LayerTape& tape, const Tensor& mask_a, double keep, const Tensor& mask_r, bool pre_norm,
                      const Layer& acc, const KeptRead* kept) {
  const int64_t read = tape.p.size(-1), head_width = v_t.size(2);  // read: the window's slots [, the kept one]
  Tensor d_mid = grad;
  if (w.ff) {
    Tensor dz2 = pre_norm ? grad
                          : layer_norm_grads(grad, tape.z2, tape.mean_z2, tape.rstd_z2, w.norm_ff_w, w.norm_ff_b, acc.norm_ff_w, acc.norm_ff_b);
    linear_grads(dz2, tape.ud, acc.fc2_w, acc.fc2_b);
    Tensor dud = at::mm(dz2, w.fc2_w);  // (B, F)
    if (mask_r.defined()) dud = dud * mask_r;
    Tensor du = at::threshold_backward(dud, tape.u, 0);
    linear_grads(du, tape.f, acc.fc1_w, acc.fc1_b);
    Tensor df = at::mm(du, w.fc1_w);
    d_mid = pre_norm ? layer_norm_grads(df, tape.h_mid, tape.mean_f, tape.rstd_f, w.norm_ff_w, w.norm_ff_b, acc.norm_ff_w, acc.norm_ff_b) + dz2
                     : df + dz2;
  }
  Tensor dz = pre_norm ? d_mid
                       : layer_norm_grads(d_mid, tape.z, tape.mean_z, tape.rstd_z, w.norm_attn_w, w.norm_attn_b, acc.norm_attn_w, acc.norm_attn_b);
  linear_grads(dz, tape.c, acc.out_w, acc.out_b);
  Tensor dc = at::mm(dz, w.out_w);  // (B, D)
  auto [dq, ds] = attend_backward(dc, tape.p, tape.pd, tape.q, k_t, v_t, w.positions_t, mask_a, keep, grad_k_t, grad_v_t, kept, w.kept_position);
  acc.positions.addmm_(ds.view({-1, read}).t(), tape.q.view({-1, head_width}));  // (S [+ 1], B H) @ (B H, E)
  linear_grads(dq, tape.a, acc.query_w, acc.query_b);
  Tensor da = at::mm(dq, w.query_w);
  if (pre_norm) return layer_norm_grads(da, tape.h, tape.mean_a, tape.rstd_a, w.norm_attn_w, w.norm_attn_b, acc.norm_attn_w, acc.norm_attn_b) + dz;
  return da + dz;
}

// A step's dropout masks of one layer: the attention's as drawn (bool (B, H, S)), the ReLU's
// scaled (mask * keep_scale, (B, F)); undefined without dropout (no masks given).
std::pair<Tensor, Tensor> step_masks(const TensorList& attention_masks, const TensorList& relu_masks, size_t layer, int64_t t,
                                     double keep_scale, at::ScalarType dtype) {
  if (attention_masks.empty()) return {};
  return {attention_masks[layer][t], relu_masks[layer][t].to(dtype).mul_(keep_scale)};
}

void check_masks(const TensorList& attention_masks, const TensorList& relu_masks, size_t layers) {
  TORCH_CHECK(attention_masks.size() == relu_masks.size() && (attention_masks.empty() || attention_masks.size() == layers),
              "dropout masks: attention_masks and relu_masks hold one per layer (", layers, ") or none, got ", attention_masks.size(),
              " and ", relu_masks.size());
}

}  // namespace

// Steps [t0, t0 + n) of a run (FeedbackRun._advance, n times): embedded (n, B, D), first (n, B)
// bool; gates (n, B, D) the carry's g_t, or none without the carry; tanh_write: m_t written as
// tanh of the layers' sum (memory_write="tanh"), before the carry blends it; episode_start (B,) long,
// updated in place; the window of step t is buffer slots [start + t - S, start + t), its memory
// vector and keys and values go to slot start + t (with the carry, blended with slot start + t - 1,
// m_{t-1}); per layer, dropout's bool masks of all the run's steps (attention (T, B, H, S), ReLU
// (T, B, F)), or none. Returns the tops (n, B, D), before the final norm; appends each step's tape
// to `tape` when given. With the kept slot: kept (B, D) the run's k_{t-1}, replaced in place by
// the last step's k_t; kept_gates (n, B, D) its a_t (both none without the kept slot).
Tensor forward_steps(const Tensor& embedded, const Tensor& first, const std::optional<Tensor>& gates, bool tanh_write,
                     const Tensor& episode_start, int64_t t0, int64_t start, const Tensor& mix, const std::vector<LayerWeights>& layer_weights,
                     const std::vector<GroupWeights>& group_weights, const Tensor& memory, const TensorList& keys, const TensorList& values,
                     const TensorList& attention_masks, const TensorList& relu_masks, double keep_scale, bool pre_norm, Tape* tape, bool blocked,
                     const std::optional<Tensor>& kept, const std::optional<Tensor>& kept_gates) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  TORCH_CHECK(kept.has_value() == kept_gates.has_value(), "forward_steps: the kept slot takes both kept and kept_gates");
  const bool keeps = kept.has_value();
  const auto layers = layers_of(layer_weights, keeps);
  check_masks(attention_masks, relu_masks, layers.size());
  const int64_t steps = embedded.size(0), span = layers[0].positions_t.size(1), groups = keys.size();  // positions_t: (E, S)
  const bool shared = groups == 1;
  Tensor k_prev = keeps ? kept->clone() : Tensor();  // k_{t-1}; each step's is a tensor of its own (the tape holds them)
  TORCH_CHECK(!blocked || tape, "forward_steps: blocked windows are a recording call's (give its tape)");
  Blocks* blocks = blocked ? &tape->blocks : nullptr;
  if (blocks && blocks->empty()) {  // the call's first steps: blocks holding the slots written so far
    blocks->span = span;
    for (int64_t g = 0; g < groups; ++g) {
      blocks->keys.push_back(new_blocks(keys[g], span));
      blocks->values.push_back(new_blocks(values[g], span));
      blocks->write(blocks->keys[g], 0, keys[g].narrow(-1, 0, start + t0));
      blocks->write(blocks->values[g], 0, values[g].narrow(-1, 0, start + t0));
    }
  }
  TORCH_CHECK(blocks == nullptr || blocks->span == span, "forward_steps: the tape's blocks are of span ", blocks ? blocks->span : 0, ", not ", span);
  Tensor tops = at::empty_like(embedded);
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = t0 + i, lo = start + t - span;
    episode_start.masked_fill_(first[i], span + t);
    StepTape step;
    if (tape) step.layers.resize(layers.size());
    Tensor h = embedded[i];
    Tensor m = mix[0] * h;
    Tensor kept_c;  // (B, 1) c_t with the kept slot: k_{t-1} (as m_{t-1}) is the episode's
    if (keeps) {  // k_{t-1} as each group projects it, read after the window while c_t
      kept_c = episode_start.le(t + span - 1).to(m.scalar_type()).unsqueeze(1);
      const Tensor bias = at::zeros_like(kept_c).masked_fill_(kept_c.eq(0), -std::numeric_limits<double>::infinity());
      for (int64_t g = 0; g < groups; ++g) {
        auto [kv, mean, rstd] = project(group_weights[g], k_prev, keys[g].size(1), keys[g].size(2));
        step.kept.push_back({kv.select(1, 0), kv.select(1, 1), bias, Tensor(), Tensor()});
        step.kept_mean.push_back(mean);
        step.kept_rstd.push_back(rstd);
      }
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      const int64_t g = shared ? 0 : l;
      auto [mask_a, mask_r] = step_masks(attention_masks, relu_masks, l, t, keep_scale, h.scalar_type());
      const Tensor k_t = blocks ? blocks->window(blocks->keys[g], lo) : keys[g].narrow(-1, lo, span);
      const Tensor v_t = blocks ? blocks->window(blocks->values[g], lo) : values[g].narrow(-1, lo, span);
      h = layer_forward(h, k_t, v_t, episode_start, t, layers[l], mask_a, keep_scale, mask_r, pre_norm, tape ? &step.layers[l] : nullptr,
                        keeps ? &step.kept[g] : nullptr);
      m = at::addcmul(m, mix[l + 1], h);
    }
    const int64_t at_slot = start + t;
    if (tanh_write) m = at::tanh(m);  // the memory bounded as it is written
    Tensor u, carried;
    if (gates) {  // the carry: m_t = g_t (c_t m_{t-1}) + (1 - g_t) u_t, u_t the sum above
      carried = episode_start.le(t + span - 1).to(m.scalar_type()).unsqueeze(1);  // (B, 1) c_t: the newest slot, m_{t-1}, is the episode's
      const Tensor gate = (*gates)[i];
      u = m;
      m = at::addcmul(at::rsub(gate, 1) * u, gate, memory.select(1, at_slot - 1) * carried);
    }
    memory.select(1, at_slot).copy_(m);
    if (keeps) {  // the kept slot: k_t = a_t (c_t k_{t-1}) + (1 - a_t) m_t
      const Tensor gate = (*kept_gates)[i];
      step.kept_read = k_prev;
      step.kept_carried = k_prev * kept_c;
      step.kept_onward = gate * kept_c;
      k_prev = at::addcmul(at::rsub(gate, 1) * m, gate, step.kept_carried);
    }
    for (int64_t g = 0; g < groups; ++g) {
      auto [kv, mean, rstd] = project(group_weights[g], m, keys[g].size(1), keys[g].size(2));
      Tensor k = kv.select(1, 0), v = kv.select(1, 1);
      keys[g].select(-1, at_slot).copy_(k);
      values[g].select(-1, at_slot).copy_(v);
      if (blocks) {
        blocks->write(blocks->keys[g], at_slot, k.unsqueeze(-1));
        blocks->write(blocks->values[g], at_slot, v.unsqueeze(-1));
      }
      if (tape) {
        step.mean.push_back(mean);
        step.rstd.push_back(rstd);
      }
    }
    tops[i].copy_(h);
    if (tape) {
      step.m = m;
      step.u = u;
      step.carried = carried;
      tape->steps.push_back(std::move(step));
    }
  }
  if (keeps) kept->copy_(k_prev);
  return tops;
}

// Steps [t0, t0 + n) of a run from their inputs, as FeedbackRun.step takes them: the embedding
// of x (n, B, input), forward_steps (its other arguments, tanh_write among them; no carry and no kept slot: their gates
// are made from the embedding in Python, and FeedbackRun.step then calls forward_steps), then the final
// norm (norm_out_w, norm_out_b; None without one: post-norm) -> the outputs (n, B, D) and the
// tops (n, B, D).
std::tuple<Tensor, Tensor> run_steps(const Tensor& x, const Tensor& first, bool tanh_write, const Tensor& episode_start, int64_t t0, int64_t start,
                                     const Tensor& embed_w, const Tensor& embed_b, const std::optional<Tensor>& norm_out_w,
                                     const std::optional<Tensor>& norm_out_b, const Tensor& mix, const std::vector<LayerWeights>& layer_weights,
                                     const std::vector<GroupWeights>& group_weights, const Tensor& memory, const TensorList& keys,
                                     const TensorList& values, const TensorList& attention_masks, const TensorList& relu_masks,
                                     double keep_scale, bool pre_norm, Tape* tape, bool blocked) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::NoGradGuard no_grad;
  Tensor tops = forward_steps(at::linear(x, embed_w, embed_b), first, std::nullopt, tanh_write, episode_start, t0, start, mix, layer_weights,
                              group_weights, memory, keys, values, attention_masks, relu_masks, keep_scale, pre_norm, tape, blocked,
                              std::nullopt, std::nullopt);
  return {norm_out_w ? std::get<0>(layer_norm(tops, *norm_out_w, *norm_out_b)) : tops, tops};
}

// An acting call (no gradients, no dropout) whole, as FeedbackCore._act takes it: run_steps from
// a state, extending its buffers in place. x (T, B, input), first (T, B) bool; tanh_write as forward_steps'; valid (B, S) bool,
// the state's; end: the buffer slot after its last; memory (B, capacity, D), keys (B, H, G, E,
// capacity) and values (the same) the state's buffers, written at slots [end, end +
// T) -> the outputs (T, B, D) and the new state's valid (B, S).
std::tuple<Tensor, Tensor> act_steps(const Tensor& x, const Tensor& first, bool tanh_write, const Tensor& valid, int64_t end, const Tensor& embed_w,
                                     const Tensor& embed_b, const std::optional<Tensor>& norm_out_w, const std::optional<Tensor>& norm_out_b,
                                     const Tensor& mix, const std::vector<LayerWeights>& layer_weights,
                                     const std::vector<GroupWeights>& group_weights, const Tensor& memory, const Tensor& keys,
                                     const Tensor& values, bool pre_norm) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::NoGradGuard no_grad;
  const int64_t steps = x.size(0), span = valid.size(1);
  TORCH_CHECK(end + steps <= memory.size(1), "act_steps: ", steps, " steps from slot ", end, " overrun the buffers' ", memory.size(1));
  Tensor episode_start = span - valid.sum(1);  // (B,) long: FeedbackRun's, counting the window's first slot as 0
  TensorList group_keys, group_values;
  for (int64_t g = 0; g < keys.size(2); ++g) {
    group_keys.push_back(keys.select(2, g));
    group_values.push_back(values.select(2, g));
  }
  Tensor y = std::get<0>(run_steps(x, first, tanh_write, episode_start, 0, end, embed_w, embed_b, norm_out_w, norm_out_b, mix, layer_weights,
                                   group_weights, memory, group_keys, group_values, {}, {}, 1.0, pre_norm, nullptr, false));
  Tensor index = at::arange(steps, steps + span, episode_start.options());  // the new window's slots, counted as episode_start
  return {y, index.unsqueeze(0) >= episode_start.unsqueeze(1)};
}

// The steps of a recorded run in reverse (FeedbackRun._backward_steps): grad_y (T, B, D) at the
// tops -> the gradients at the embedded inputs (T, B, D), at softmax(w) per step (T, L + 1) and
// at the carry's gates (T, B, D; undefined, None in Python, without the carry); the weights'
// gradients are added into acc_layers (shaped like layer_weights), every slot's key and value
// gradients into grad_kv (per group (B, 2, H, E, S + T)); keys and values (B, H, E, S + T) per
// group, the buffers the forward wrote (read from the tape's blocks where the forward kept them:
// gradients then go into blocks of their own, summed into grad_kv at the end); gates (T, B, D) the
// carry's the forward took, or none; memory (B, S + T, D) the memory buffer the forward wrote (the
// S slots carried in, then the steps': step t's m_{t-1} is slot S + t - 1); tanh_write and the
// masks as forward_steps'. With the kept slot: kept_gates (T, B, D) its a_t, the gradient at them
// returned (else undefined); the key and value gradients of the k_{t-1} step t read written into
// grad_kept (per group (B, 2 D, T)) and that k_{t-1} into kept_reads (B, T, D), for the
// projections' weight gradients.
std::tuple<Tensor, Tensor, Tensor, Tensor> backward_steps(const Tensor& grad_y, const Tensor& tops, const Tape& tape, const Tensor& mix,
                                                          const std::vector<LayerWeights>& layer_weights,
                                                          const std::vector<GroupWeights>& group_weights, const TensorList& keys,
                                                          const TensorList& values, const TensorList& grad_kv, const std::optional<Tensor>& gates,
                                                          bool tanh_write, const Tensor& memory, const TensorList& attention_masks,
                                                          const TensorList& relu_masks, double keep_scale, bool pre_norm,
                                                          const std::vector<LayerWeights>& acc_layers, const std::optional<Tensor>& kept_gates,
                                                          const TensorList& grad_kept, const std::optional<Tensor>& kept_reads) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::NoGradGuard no_grad;
  const bool keeps = kept_gates.has_value();
  TORCH_CHECK(keeps == kept_reads.has_value() && keeps == !grad_kept.empty(), "backward_steps: the kept slot takes kept_gates, grad_kept and kept_reads");
  const auto layers = layers_of(layer_weights, keeps), acc = layers_of(acc_layers, keeps);
  check_masks(attention_masks, relu_masks, layers.size());
  const int64_t steps = grad_y.size(0), batch = grad_y.size(1), width = grad_y.size(2), groups = keys.size();
  const int64_t span = grad_kv[0].size(-1) - steps;
  const bool shared = groups == 1;
  const int64_t n_layers = layers.size();
  const Blocks& blocks = tape.blocks;
  TensorList grad_blocks;  // per group (blocks, B, 2, H, E, 2 S): the slots' key and value gradients, each slot in two blocks
  for (int64_t g = 0; g < (blocks.empty() ? 0 : groups); ++g) {
    TORCH_CHECK(blocks.span == span, "backward_steps: the tape's blocks are of span ", blocks.span, ", not ", span);
    const Tensor& grad = grad_kv[g];  // (B, 2, H, E, S + T)
    grad_blocks.push_back(at::zeros({(grad.size(-1) + span - 1) / span, batch, 2, grad.size(2), grad.size(3), 2 * span}, grad.options()));
  }
  // slot u's key and value gradients of group g, (B, 2, H, E): complete once the steps that read it are done
  const auto slot_grad = [&](int64_t g, int64_t u) {
    if (blocks.empty()) return grad_kv[g].select(-1, u);
    const int64_t j = u / span;
    Tensor sum = grad_blocks[g][j].select(-1, u - j * span);
    return j > 0 ? sum + grad_blocks[g][j - 1].select(-1, u - (j - 1) * span) : sum;
  };
  Tensor d_embedded = at::empty_like(grad_y), d_mix = at::empty({steps, n_layers + 1}, grad_y.options());
  Tensor d_gates = gates ? at::empty_like(grad_y) : Tensor();
  Tensor d_kept_gates = keeps ? at::empty_like(grad_y) : Tensor();
  Tensor onward;  // with the carry: g_{t+1} c_{t+1} dm_{t+1}, the gradient at m_t through the next step's carry
  Tensor dk;  // with the kept slot: the gradient at k_t, complete when the walk reaches step t
  for (int64_t t = steps - 1; t >= 0; --t) {
    const StepTape& step = tape.steps[t];
    Tensor dm;
    for (int64_t g = 0; g < groups; ++g) {
      const GroupWeights& w = group_weights[g];
      Tensor d_normed = at::mm(slot_grad(g, span + t).reshape({batch, 2 * width}), w.kv_w);  // keys' then values' (B, 2 D)
      Tensor dg = !absent(w.norm_w) ? layer_norm_input_grad(d_normed, step.m, step.mean[g], step.rstd[g], w.norm_w) : d_normed;
      dm = dm.defined() ? dm + dg : dg;
    }
    std::vector<KeptRead> kept;  // with the kept slot: step t's reads of k_{t-1}, with gradient accumulators
    Tensor onward_kept;  // a_t c_t dk_t: the gradient at k_{t-1} through the blend
    if (keeps) {  // dk_t -> dm_t, da_t, and the share onward to k_{t-1}
      if (dk.defined()) {
        d_kept_gates[t].copy_(dk * (step.kept_carried - step.m));
        dm = dm + dk - (*kept_gates)[t] * dk;
        onward_kept = step.kept_onward * dk;
      } else {  // k_{T-1}: nothing in the call reads it
        d_kept_gates[t].zero_();
      }
      for (int64_t g = 0; g < groups; ++g) {
        KeptRead read = step.kept[g];
        read.grad_keys = at::zeros_like(read.keys);
        read.grad_values = at::zeros_like(read.values);
        kept.push_back(read);
      }
    }
    if (gates) {  // dm_t -> du_t, dg_t, and the share onward to m_{t-1}
      if (onward.defined()) dm = dm + onward;
      const Tensor gate = (*gates)[t];
      d_gates[t].copy_(dm * (memory.select(1, span + t - 1) * step.carried - step.u));
      onward = gate * step.carried * dm;
      dm = dm - gate * dm;  // du_t = (1 - g_t) dm_t
    }
    if (tanh_write) {  // written = tanh(u_t): du_t = (1 - written^2) d written
      const Tensor& written = gates ? step.u : step.m;
      dm = dm * (1 - written * written);
    }
    TensorList outs;
    for (const auto& layer : step.layers) outs.push_back(layer.h);
    outs.push_back(tops[t]);
    d_mix[t].copy_(at::mv(at::stack(outs).view({n_layers + 1, -1}), dm.view(-1)));
    Tensor dh = at::addcmul(grad_y[t], dm, mix[n_layers]);
    for (int64_t l = n_layers - 1; l >= 0; --l) {
      const int64_t g = shared ? 0 : l;
      auto [mask_a, mask_r] = step_masks(attention_masks, relu_masks, l, t, keep_scale, grad_y.scalar_type());
      const int64_t j = t / span;  // the block whose rows hold the window [t, t + S), where blocked
      const Tensor grad_window = blocks.empty() ? grad_kv[g].narrow(-1, t, span) : grad_blocks[g][j].narrow(-1, t - j * span, span);
      const Tensor k_t = blocks.empty() ? keys[g].narrow(-1, t, span) : blocks.window(blocks.keys[g], t);
      const Tensor v_t = blocks.empty() ? values[g].narrow(-1, t, span) : blocks.window(blocks.values[g], t);
      dh = layer_backward(dh, k_t, v_t, grad_window.select(1, 0), grad_window.select(1, 1), layers[l], step.layers[l], mask_a, keep_scale,
                          mask_r, pre_norm, acc[l], keeps ? &kept[g] : nullptr);
      dh = at::addcmul(dh, dm, mix[l]);
    }
    d_embedded[t].copy_(dh);
    if (keeps) {  // the gradient at k_{t-1}: through step t's reads (each group's projection) and its blend
      dk = onward_kept;
      for (int64_t g = 0; g < groups; ++g) {
        const GroupWeights& w = group_weights[g];
        const Tensor grad = at::stack({kept[g].grad_keys, kept[g].grad_values}, 1).reshape({batch, 2 * width});  // keys' then values' (B, 2 D)
        grad_kept[g].select(-1, t).copy_(grad);
        Tensor d_normed = at::mm(grad, w.kv_w);
        Tensor dg = !absent(w.norm_w) ? layer_norm_input_grad(d_normed, step.kept_read, step.kept_mean[g], step.kept_rstd[g], w.norm_w) : d_normed;
        dk = dk.defined() ? dk + dg : dg;
      }
      kept_reads->select(1, t).copy_(step.kept_read);
    }
  }
  for (size_t g = 0; g < grad_blocks.size(); ++g) {  // each slot's two parts into grad_kv
    const int64_t slots = grad_kv[g].size(-1);
    for (int64_t j = 0; j < grad_blocks[g].size(0); ++j) {
      const int64_t n = std::min(2 * span, slots - j * span);
      grad_kv[g].narrow(-1, j * span, n).add_(grad_blocks[g][j].narrow(-1, 0, n));
    }
  }
  return {d_embedded, d_mix, d_gates, d_kept_gates};
}

// Every argument by keyword (py::kw_only): a call names what it passes.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Tape>(m, "Tape", py::module_local()).def(py::init<>());
  bind_fields(m, "LayerWeights", LAYER_WEIGHTS, "One layer's weights, by keyword: step.LayerWeights' fields (None for an absent one).");
  bind_fields(m, "GroupWeights", GROUP_WEIGHTS, "A key/value projection's weights, by keyword: step.GroupWeights' fields.");
  m.def("forward_steps", &forward_steps, "steps of a Feedback run", py::kw_only(), py::arg("embedded"), py::arg("first"),
        py::arg("gates").none(true), py::arg("tanh_write"), py::arg("episode_start"), py::arg("t0"), py::arg("start"), py::arg("mix"),
        py::arg("layer_weights"), py::arg("group_weights"), py::arg("memory"), py::arg("keys"), py::arg("values"),
        py::arg("attention_masks"), py::arg("relu_masks"), py::arg("keep_scale"), py::arg("pre_norm"), py::arg("tape").none(true),
        py::arg("blocked"), py::arg("kept").none(true), py::arg("kept_gates").none(true));
  m.def("run_steps", &run_steps, "steps of a Feedback run from their inputs: embedding, steps, final norm", py::kw_only(), py::arg("x"),
        py::arg("first"), py::arg("tanh_write"), py::arg("episode_start"), py::arg("t0"), py::arg("start"), py::arg("embed_w"), py::arg("embed_b"),
        py::arg("norm_out_w").none(true), py::arg("norm_out_b").none(true), py::arg("mix"), py::arg("layer_weights"),
        py::arg("group_weights"), py::arg("memory"), py::arg("keys"), py::arg("values"), py::arg("attention_masks"),
        py::arg("relu_masks"), py::arg("keep_scale"), py::arg("pre_norm"), py::arg("tape").none(true), py::arg("blocked"));
  m.def("act_steps", &act_steps, "an acting call whole: embedding, steps, final norm", py::kw_only(), py::arg("x"), py::arg("first"),
        py::arg("tanh_write"), py::arg("valid"), py::arg("end"), py::arg("embed_w"), py::arg("embed_b"), py::arg("norm_out_w").none(true),
        py::arg("norm_out_b").none(true), py::arg("mix"), py::arg("layer_weights"), py::arg("group_weights"), py::arg("memory"),
        py::arg("keys"), py::arg("values"), py::arg("pre_norm"));
  m.def("backward_steps", &backward_steps, "a recorded Feedback run's steps in reverse", py::kw_only(), py::arg("grad_y"),
        py::arg("tops"), py::arg("tape"), py::arg("mix"), py::arg("layer_weights"), py::arg("group_weights"), py::arg("keys"),
        py::arg("values"), py::arg("grad_kv"), py::arg("gates").none(true), py::arg("tanh_write"), py::arg("memory"), py::arg("attention_masks"),
        py::arg("relu_masks"), py::arg("keep_scale"), py::arg("pre_norm"), py::arg("acc_layers"), py::arg("kept_gates").none(true),
        py::arg("grad_kept"), py::arg("kept_reads").none(true));
}
