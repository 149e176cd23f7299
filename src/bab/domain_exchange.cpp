// The messages of a branch and bound across ranks (domain.hpp). Every rank runs the same binary on
// the same host architecture, so numbers travel as their bytes; a reader that runs past the end of
// a message throws (a truncated or foreign message is an error, never a guess).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "domain.hpp"

namespace distcrown::bab::detail {
namespace {

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_bytes(std::string_view s) {
    put(int64_t(s.size()));
    out_.append(s);
  }
  void put_doubles(const std::vector<double>& v) {
    put(int64_t(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  // Undefined tensors travel as a flag.
  void put_tensor(const at::Tensor& t) {
    put(uint8_t(t.defined()));
    if (!t.defined()) return;
    const at::Tensor c = t.detach().cpu().contiguous();
    put(int8_t(c.scalar_type()));
    put(int64_t(c.dim()));
    for (const int64_t s : c.sizes()) put(s);
    out_.append(static_cast<const char*>(c.const_data_ptr()), c.nbytes());
  }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof v).data(), sizeof v);
    return v;
  }
  std::string_view get_bytes() { return take(size_t(get<int64_t>())); }
  std::vector<double> get_doubles() {
    const auto n = size_t(get<int64_t>());
    std::vector<double> v(n);
    if (n > 0) std::memcpy(v.data(), take(n * sizeof(double)).data(), n * sizeof(double));
    return v;
  }
  at::Tensor get_tensor(const at::Device& device) {
    if (get<uint8_t>() == 0) return {};
    const auto type = at::ScalarType(get<int8_t>());
    std::vector<int64_t> sizes(size_t(get<int64_t>()));
    for (int64_t& s : sizes) s = get<int64_t>();
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type));
    std::memcpy(t.mutable_data_ptr(), take(t.nbytes()).data(), t.nbytes());
    return t.to(device);
  }
  [[nodiscard]] bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view take(size_t n) {
    if (n > in_.size() - pos_) throw Error("internal: truncated branch-and-bound message");
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace

std::string encode_report(const RoundReport& r) {
  Writer w;
  w.put(uint8_t(r.timed_out));
  w.put(uint8_t(r.exhausted));
  w.put(uint8_t(r.no_splittable));
  w.put(uint8_t(r.counterexample.has_value()));
  if (r.counterexample) {
    w.put_doubles(r.counterexample->x);
    w.put_doubles(r.counterexample->y);
  }
  w.put(r.queued);
  w.put(r.bounded);
  w.put(int64_t(r.candidates.size()));
  for (const auto& [value, id] : r.candidates) {
    w.put(value);
    w.put(id);
  }
  w.put(r.batch_cap);
  w.put(uint8_t(r.memory_full));
  w.put(r.live_bytes);
  w.put(r.limit_bytes);
  return w.take();
}

RoundReport decode_report(std::string_view bytes) {
  Reader in(bytes);
  RoundReport r;
  r.timed_out = in.get<uint8_t>() != 0;
  r.exhausted = in.get<uint8_t>() != 0;
  r.no_splittable = in.get<uint8_t>() != 0;
  if (in.get<uint8_t>() != 0) {
    Counterexample c;
    c.x = in.get_doubles();
    c.y = in.get_doubles();
    r.counterexample = std::move(c);
  }
  r.queued = in.get<int64_t>();
  r.bounded = in.get<int64_t>();
  r.candidates.resize(size_t(in.get<int64_t>()));
  for (auto& [value, id] : r.candidates) {
    value = in.get<double>();
    id = in.get<int64_t>();
  }
  r.batch_cap = in.get<int64_t>();
  r.memory_full = in.get<uint8_t>() != 0;
  r.live_bytes = in.get<int64_t>();
  r.limit_bytes = in.get<int64_t>();
  if (!in.done()) throw Error("internal: trailing bytes in a branch-and-bound report");
  return r;
}

RoundTally tally_round(const std::vector<RoundReport>& groups, BabResult& res) {
  RoundTally t;
  res.domains_bounded = 0;
  res.domains_per_group.clear();
  for (const RoundReport& g : groups) {
    res.domains_bounded += g.bounded;
    res.domains_per_group.push_back(g.bounded);
    t.queued += g.queued;
    t.exhausted = t.exhausted || g.exhausted;
    t.no_splittable = t.no_splittable || g.no_splittable;
    t.timed_out = t.timed_out || g.timed_out;
  }
  for (size_t k = 0; k < groups.size() && !t.falsified; ++k) {
    if (!groups[k].counterexample) continue;
    t.falsified = true;
    res.counterexample = groups[k].counterexample;
    if (res.rounds > 0) res.counterexample_group = int(k);
  }
  return t;
}

std::vector<Planned> plan_round(const std::vector<RoundReport>& groups, int64_t batch) {
  std::vector<Planned> all;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& [value, id] : groups[g].candidates) all.push_back({value, id, int(g), -1});
  }
  std::sort(all.begin(), all.end(), [](const Planned& a, const Planned& b) {
    return a.value != b.value ? a.value < b.value : a.id < b.id;
  });
  if (int64_t(all.size()) > batch) all.resize(size_t(batch));
  const auto n = int64_t(all.size());
  const auto G = int64_t(groups.size());
  const int64_t cap = (n + G - 1) / G;
  std::vector<int64_t> count(size_t(G), 0);
  for (Planned& p : all) {
    if (count[size_t(p.holder)] < cap) {
      p.bounder = p.holder;
      ++count[size_t(p.holder)];
    }
  }
  for (Planned& p : all) {
    if (p.bounder >= 0) continue;
    const auto least = std::min_element(count.begin(), count.end());
    p.bounder = int(least - count.begin());
    ++*least;
  }
  return all;
}

std::string encode_domain(const Domain& d) {
  Writer w;
  w.put(d.value);
  w.put(d.floor);
  w.put(d.id);
  w.put(int64_t(d.lower.size()));
  for (size_t r = 0; r < d.lower.size(); ++r) {
    for (const at::Tensor* t : {&d.lower[r], &d.upper[r], &d.alpha[r], &d.beta[r], &d.split[r]}) {
      w.put_tensor(*t);
    }
  }
  w.put_tensor(d.score);
  return w.take();
}

Domain decode_domain(std::string_view bytes, const at::Device& device) {
  Reader in(bytes);
  Domain d;
  d.value = in.get<double>();
  d.floor = in.get<double>();
  d.id = in.get<int64_t>();
  const auto R = size_t(in.get<int64_t>());
  for (size_t r = 0; r < R; ++r) {
    for (std::vector<at::Tensor>* v : {&d.lower, &d.upper, &d.alpha, &d.beta, &d.split}) {
      v->push_back(in.get_tensor(device));
    }
  }
  d.score = in.get_tensor(device);
  if (!in.done()) throw Error("internal: trailing bytes in a branch-and-bound domain");
  return d;
}

std::string encode_domain(const SubBox& b) {
  Writer w;
  w.put(b.value);
  w.put(b.split_dim);
  w.put(b.id);
  for (const std::vector<double>* v : {&b.lower, &b.upper, &b.A, &b.c}) w.put_doubles(*v);
  return w.take();
}

SubBox decode_box(std::string_view bytes) {
  Reader in(bytes);
  SubBox b;
  b.value = in.get<double>();
  b.split_dim = in.get<int64_t>();
  b.id = in.get<int64_t>();
  for (std::vector<double>* v : {&b.lower, &b.upper, &b.A, &b.c}) *v = in.get_doubles();
  if (!in.done()) throw Error("internal: trailing bytes in a branch-and-bound sub-box");
  return b;
}

std::string encode_moving(const std::vector<std::pair<int64_t, std::string>>& domains) {
  Writer w;
  w.put(int64_t(domains.size()));
  for (const auto& [position, bytes] : domains) {
    w.put(position);
    w.put_bytes(bytes);
  }
  return w.take();
}

std::vector<std::pair<int64_t, std::string>> decode_moving(std::string_view bytes) {
  if (bytes.empty()) return {};  // a rank that speaks for no group
  Reader in(bytes);
  std::vector<std::pair<int64_t, std::string>> out(size_t(in.get<int64_t>()));
  for (auto& [position, domain] : out) {
    position = in.get<int64_t>();
    domain = std::string(in.get_bytes());
  }
  if (!in.done()) throw Error("internal: trailing bytes in a branch-and-bound message");
  return out;
}

std::vector<RoundReport> exchange_reports(const BabWorld& w, const RoundReport& mine) {
  if (w.world_size() == 1) return {mine};
  std::vector<RoundReport> groups;
  bool timed_out = false;
  int64_t batch_cap = std::numeric_limits<int64_t>::max();
  std::optional<RoundReport> full;  // the lowest rank whose memory is full
  const std::vector<std::string> all = w.world->all_gather_strings(encode_report(mine));
  for (size_t r = 0; r < all.size(); ++r) {
    RoundReport report = decode_report(all[r]);
    timed_out = timed_out || report.timed_out;
    batch_cap = std::min(batch_cap, report.batch_cap);
    if (report.memory_full && !full) full = report;
    if (int(r) % w.group_size() == 0) groups.push_back(std::move(report));
  }
  for (RoundReport& g : groups) {
    g.timed_out = timed_out;
    g.batch_cap = batch_cap;
    if (full) {
      g.memory_full = true;
      g.live_bytes = full->live_bytes;
      g.limit_bytes = full->limit_bytes;
    }
  }
  return groups;
}

std::vector<std::pair<int64_t, std::string>> move_planned(
    const BabWorld& w, const std::vector<std::pair<int64_t, std::string>>& outgoing) {
  std::vector<std::pair<int64_t, std::string>> moving;
  for (const std::string& message :
       w.world->all_gather_strings(w.group_leader() ? encode_moving(outgoing) : "")) {
    for (auto& m : decode_moving(message)) moving.push_back(std::move(m));
  }
  return moving;
}

}  // namespace distcrown::bab::detail
