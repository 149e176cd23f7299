// VNNLIB parser: a single-pass tokenizer feeding a recursive-descent parser that converts each
// assert straight to disjunctive normal form over "atoms" (normalised linear comparisons), then
// turns the DNF terms into input boxes and output constraints. See vnnlib.hpp for the semantics.
#include "distcrown/io/vnnlib.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "io/vnnlib_tensors.hpp"

namespace distcrown::io {
namespace {

constexpr size_t kMaxDnfTerms = 1000000;   // nn4sys lindex_60000: 120,000 disjuncts
constexpr size_t kMaxDnfAtoms = 20000000;  // total atom references over all terms of one DNF
constexpr int kMaxDepth = 1000;
constexpr size_t kMaxIndexDigits = 9;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Pos {
  int64_t line = 1, col = 1;
};

std::string pos_str(Pos p) { return std::to_string(p.line) + ":" + std::to_string(p.col); }

// ---------------------------------------------------------------------------------------------
// Tokenizer

enum class TokKind { kLParen, kRParen, kAtom, kEof };

// How messages name a token of each kind (an atom is shown by its text instead).
constexpr auto enum_table(TokKind) {
  using P = std::pair<TokKind, std::string_view>;
  return std::array{P{TokKind::kLParen, "'('"}, P{TokKind::kRParen, "')'"},
                    P{TokKind::kAtom, "atom"}, P{TokKind::kEof, "end of file"}};
}

struct Token {
  TokKind kind = TokKind::kEof;
  std::string_view text;
  Pos pos;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_delimiter(char c) { return is_space(c) || c == '(' || c == ')' || c == ';'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  const Token& peek() {
    if (!has_lookahead_) {
      lookahead_ = scan();
      has_lookahead_ = true;
    }
    return lookahead_;
  }

  Token next() {
    Token t = peek();
    has_lookahead_ = false;
    return t;
  }

 private:
  void advance() {
    if (text_[i_] == '\n') {
      ++pos_.line;
      pos_.col = 1;
    } else {
      ++pos_.col;
    }
    ++i_;
  }

  void skip_space_and_comments() {
    while (i_ < text_.size()) {
      if (is_space(text_[i_])) {
        advance();
      } else if (text_[i_] == ';') {
        while (i_ < text_.size() && text_[i_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  Token scan() {
    skip_space_and_comments();
    Token t;
    t.pos = pos_;
    if (i_ >= text_.size()) return t;
    char c = text_[i_];
    if (c == '(' || c == ')') {
      t.kind = c == '(' ? TokKind::kLParen : TokKind::kRParen;
      t.text = text_.substr(i_, 1);
      advance();
      return t;
    }
    // An atom; inside brackets (2.0's shapes and indices, "[1, 3]") spaces do not end it.
    size_t start = i_;
    int brackets = 0;
    while (i_ < text_.size()) {
      const char ch = text_[i_];
      if (ch == '[') ++brackets;
      if (ch == ']' && brackets > 0) --brackets;
      if (brackets > 0 ? (ch == '(' || ch == ')' || ch == ';') : is_delimiter(ch)) break;
      advance();
    }
    t.kind = TokKind::kAtom;
    t.text = text_.substr(start, i_ - start);
    return t;
  }

  std::string_view text_;
  size_t i_ = 0;
  Pos pos_;
  Token lookahead_;
  bool has_lookahead_ = false;
};

// ---------------------------------------------------------------------------------------------
// Lexical helpers

// Decimal number: [+-]? (digits [. digits*] | . digits) ([eE] [+-]? digits)?
bool is_decimal(std::string_view s) {
  size_t i = 0;
  auto digits = [&]() {
    size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t int_digits = digits();
  size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    frac_digits = digits();
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// Whether an atom is meant as a number (so a malformed one is reported as a bad number).
bool looks_numeric(std::string_view s) {
  auto numeric_start = [](char c) { return (c >= '0' && c <= '9') || c == '.'; };
  if (s.empty()) return false;
  if (numeric_start(s[0])) return true;
  return (s[0] == '+' || s[0] == '-') && s.size() > 1 && numeric_start(s[1]);
}

struct VarName {
  bool is_output = false;
  int64_t index = 0;
};

// Parses "X_<i>" / "Y_<j>" (decimal index, no leading zeros). Returns false for anything else.
bool parse_var_name(std::string_view s, VarName* out) {
  if (s.size() < 3 || (s[0] != 'X' && s[0] != 'Y') || s[1] != '_') return false;
  std::string_view digits = s.substr(2);
  if (digits.size() > kMaxIndexDigits || (digits.size() > 1 && digits[0] == '0')) return false;
  int64_t index = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    index = index * 10 + (c - '0');
  }
  out->is_output = s[0] == 'Y';
  out->index = index;
  return true;
}

std::string var_str(bool is_output, int64_t index) {
  return std::string(is_output ? "Y_" : "X_") + std::to_string(index);
}

// ---------------------------------------------------------------------------------------------
// Linear expressions, atoms and DNF

// Variables in expressions are keyed index * 2 + (is_output ? 1 : 0).
int64_t var_key(const VarName& v) { return v.index * 2 + (v.is_output ? 1 : 0); }
bool key_is_output(int64_t key) { return (key & 1) != 0; }
int64_t key_index(int64_t key) { return key >> 1; }

struct LinExpr {
  std::vector<std::pair<int64_t, double>> coeffs;  // (var key, coefficient), may repeat keys
  double constant = 0.0;
  Pos pos;
};

// Sorts by variable, merges repeated variables and drops zero coefficients.
void normalize(LinExpr* e) {
  auto& c = e->coeffs;
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t out = 0;
  for (size_t i = 0; i < c.size();) {
    int64_t key = c[i].first;
    double sum = 0.0;
    for (; i < c.size() && c[i].first == key; ++i) sum += c[i].second;
    if (sum != 0.0) c[out++] = {key, sum};
  }
  c.resize(out);
}

void scale(LinExpr* e, double factor) {
  for (auto& kv : e->coeffs) kv.second *= factor;
  e->constant *= factor;
}

void add_to(LinExpr* acc, const LinExpr& e, double sign) {
  for (const auto& kv : e.coeffs) acc->coeffs.emplace_back(kv.first, sign * kv.second);
  acc->constant += sign * e.constant;
}

// A normalised comparison kept by a DNF term.
struct Atom {
  // kInputRelation: a comparison of several inputs (2.0), Σ coeffs·X <= value.
  enum class Kind { kInputLower, kInputUpper, kInputRelation, kOutput } kind = Kind::kOutput;
  int64_t input = 0;   // input bounds: X index
  double value = 0.0;  // input bounds: the bound; relations and outputs: rhs
  std::vector<std::pair<int64_t, double>> coeffs;  // relations (X), outputs (Y): (index, coeff)
  bool strict = false;                             // relations and outputs: < rather than <=
  Pos pos;                                         // relations: where written
};

// Tightens the box [lo, hi] by constraints Σ a_i·x_i <= c (each variable's bound from the
// others', a few sweeps), rounded outward: a box must hold every input that satisfies them, and
// some variables are bounded only through others (X_g[0] >= X_f[0]).
void tighten_box(const std::vector<LinearConstraint>& relations, std::vector<double>* lo,
                 std::vector<double>* hi) {
  constexpr int kSweeps = 8;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    bool changed = false;
    for (const LinearConstraint& k : relations) {
      for (size_t j = 0; j < k.coeffs.size(); ++j) {
        const double a = k.coeffs[j];
        if (a == 0) continue;
        double rest = 0;  // the least Σ_{i≠j} a_i·x_i over the box
        for (size_t i = 0; i < k.coeffs.size() && std::isfinite(rest); ++i) {
          if (i != j && k.coeffs[i] != 0) {
            rest += std::min(k.coeffs[i] * (*lo)[i], k.coeffs[i] * (*hi)[i]);
          }
        }
        if (!std::isfinite(rest)) continue;
        const double bound = (k.rhs - rest) / a;
        if (a > 0 && bound < (*hi)[j]) {
          (*hi)[j] = std::nextafter(bound, kInf);
          changed = true;
        } else if (a < 0 && bound > (*lo)[j]) {
          (*lo)[j] = std::nextafter(bound, -kInf);
          changed = true;
        }
      }
    }
    if (!changed) return;
  }
}

using Term = std::vector<int32_t>;  // atom ids, in textual order
using Dnf = std::vector<Term>;      // {} is false, {{}} is true

Dnf dnf_true() { return Dnf(1); }

// ---------------------------------------------------------------------------------------------
// Parser

// A parse error at position p of the file `source`.
[[noreturn]] void fail_at(const std::string& source, Pos p, const std::string& msg) {
  throw ParseError(source + ":" + pos_str(p) + ": " + msg);
}

// The property a parsed file describes: its declarations checked, and its DNF grouped into input
// boxes (one per distinct box) with their output disjuncts. Errors name the file and position.
class CaseAssembly {
 public:
  CaseAssembly(const std::string& source, Pos eof_pos,
               const std::unordered_map<int64_t, Pos> (&declared)[2],
               const detail::TensorDeclarations& names, const std::vector<Atom>& atoms,
               const Term& common, const Dnf& rest)
      : source_(source),
        eof_pos_(eof_pos),
        declared_(declared),
        names_(names),
        atoms_(atoms),
        common_(common),
        rest_(rest) {}

  VnnlibProperty assemble() const {
    VnnlibProperty prop;
    prop.source = source_;
    prop.num_inputs = check_declarations(false);
    prop.num_outputs = check_declarations(true);
    collect_input_relations(&prop);
    build_cases(&prop);
    return prop;
  }

 private:
  [[noreturn]] void fail(Pos p, const std::string& msg) const { fail_at(source_, p, msg); }

  // Checks that the X (or Y) indices are 0..n-1 and returns n.
  int64_t check_declarations(bool is_output) const {
    const auto& decls = declared_[is_output];
    const char* prefix = is_output ? "Y" : "X";
    if (decls.empty()) {
      fail(eof_pos_, std::string("no ") + (is_output ? "output" : "input") +
                         " variables declared " + "(expected (declare-const " + prefix +
                         "_0 Real))");
    }
    int64_t n = static_cast<int64_t>(decls.size());
    const std::pair<const int64_t, Pos>* stray = nullptr;  // smallest index >= n
    for (const auto& kv : decls) {
      if (kv.first >= n && (stray == nullptr || kv.first < stray->first)) stray = &kv;
    }
    if (stray == nullptr) return n;
    int64_t missing = 0;
    while (decls.count(missing) != 0) ++missing;
    fail(stray->second, names_.name_of(is_output, stray->first) + " is declared but " +
                            names_.name_of(is_output, missing) +
                            " is not: variable indices must be contiguous from 0");
  }

  void apply_input_bounds(const Term& term, std::vector<double>* lo,
                          std::vector<double>* hi) const {
    for (int32_t id : term) {
      const Atom& a = atoms_[id];
      if (a.kind == Atom::Kind::kInputLower) {
        (*lo)[a.input] = std::max((*lo)[a.input], a.value);
      } else if (a.kind == Atom::Kind::kInputUpper) {
        (*hi)[a.input] = std::min((*hi)[a.input], a.value);
      }
    }
  }

  // Throws if some X_i of a non-empty box lacks a finite bound.
  void check_box_bounded(const std::vector<double>& lo, const std::vector<double>& hi,
                         size_t term_index) const {
    for (size_t i = 0; i < lo.size(); ++i) {
      bool no_lower = !std::isfinite(lo[i]);
      if (!no_lower && std::isfinite(hi[i])) continue;
      std::string msg = names_.name_of(false, static_cast<int64_t>(i)) + " has no " +
                        (no_lower ? "lower" : "upper") + " bound";
      if (rest_.size() > 1) {
        msg += " in disjunct " + std::to_string(term_index + 1) + " of " +
               std::to_string(rest_.size()) + " of the formula's disjunctive normal form";
      }
      fail(declared_[0].at(static_cast<int64_t>(i)), msg);
    }
  }

  LinearConstraint to_constraint(const Atom& a, int64_t num_outputs) const {
    LinearConstraint c;
    c.coeffs.assign(static_cast<size_t>(num_outputs), 0.0);
    for (const auto& [index, coeff] : a.coeffs) c.coeffs[static_cast<size_t>(index)] = coeff;
    c.rhs = a.value;
    c.strict = a.strict;
    return c;
  }

  // The output constraints of `common_` and `term`, merged in textual order.
  OutputConjunction make_conjunction(const Term& common_outputs, const Term& term,
                                     int64_t num_outputs) const {
    Term ids;
    for (int32_t id : term) {
      if (atoms_[id].kind == Atom::Kind::kOutput) ids.push_back(id);
    }
    Term merged;
    std::merge(common_outputs.begin(), common_outputs.end(), ids.begin(), ids.end(),
               std::back_inserter(merged));
    OutputConjunction conj;
    for (int32_t id : merged) conj.constraints.push_back(to_constraint(atoms_[id], num_outputs));
    return conj;
  }

  // The constraints relating inputs: common to every case (a relation under an `or` would need a
  // set of them per case).
  void collect_input_relations(VnnlibProperty* prop) const {
    for (const Term& term : rest_) {
      for (const int32_t id : term) {
        if (atoms_[id].kind == Atom::Kind::kInputRelation) {
          fail(atoms_[id].pos, "unsupported: a constraint relating inputs under an 'or'");
        }
      }
    }
    for (const int32_t id : common_) {
      if (atoms_[id].kind == Atom::Kind::kInputRelation) {
        prop->input_constraints.push_back(to_constraint(atoms_[id], prop->num_inputs));
      }
    }
  }

  void build_cases(VnnlibProperty* prop) const {
    size_t n = static_cast<size_t>(prop->num_inputs);
    std::vector<double> common_lo(n, -kInf), common_hi(n, kInf);
    apply_input_bounds(common_, &common_lo, &common_hi);
    Term common_outputs;
    for (int32_t id : common_) {
      if (atoms_[id].kind == Atom::Kind::kOutput) common_outputs.push_back(id);
    }
    std::map<std::vector<double>, size_t> case_of_box;  // lower ++ upper -> index in cases
    for (size_t k = 0; k < rest_.size(); ++k) {
      std::vector<double> lo = common_lo, hi = common_hi;
      apply_input_bounds(rest_[k], &lo, &hi);
      tighten_box(prop->input_constraints, &lo, &hi);
      bool empty = false;
      for (size_t i = 0; i < n && !empty; ++i) empty = lo[i] > hi[i];
      if (empty) continue;
      check_box_bounded(lo, hi, k);
      std::vector<double> key = lo;
      key.insert(key.end(), hi.begin(), hi.end());
      auto [it, inserted] = case_of_box.emplace(std::move(key), prop->cases.size());
      if (inserted) {
        prop->cases.emplace_back();
        prop->cases.back().input_lower = std::move(lo);
        prop->cases.back().input_upper = std::move(hi);
      }
      prop->cases[it->second].disjuncts.push_back(
          make_conjunction(common_outputs, rest_[k], prop->num_outputs));
    }
  }

  const std::string& source_;
  Pos eof_pos_;
  const std::unordered_map<int64_t, Pos> (&declared_)[2];
  const detail::TensorDeclarations& names_;
  const std::vector<Atom>& atoms_;
  const Term& common_;
  const Dnf& rest_;
};

// The token stream of one file with the checks every command needs; errors name the file and
// position.
class TokenReader {
 public:
  TokenReader(std::string_view text, std::string source)
      : lexer_(text), source_(std::move(source)) {}

  Lexer& lexer() { return lexer_; }
  [[nodiscard]] const std::string& source() const { return source_; }

  [[noreturn]] void fail(Pos p, const std::string& msg) const { fail_at(source_, p, msg); }

  static std::string describe(const Token& t) {
    if (t.kind != TokKind::kAtom) return std::string(enum_name(t.kind));
    constexpr size_t kMaxShown = 40;
    if (t.text.size() > kMaxShown) return "'" + std::string(t.text.substr(0, kMaxShown)) + "...'";
    return "'" + std::string(t.text) + "'";
  }

  [[noreturn]] void fail_expected(const Token& found, const std::string& expected) const {
    if (found.kind == TokKind::kEof) {
      fail(found.pos, "unexpected end of file: expected " + expected);
    }
    fail(found.pos, "expected " + expected + ", found " + describe(found));
  }

  void check_depth(int depth, Pos p) const {
    if (depth > kMaxDepth) fail(p, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  Token expect_atom(const std::string& expected) {
    Token t = lexer_.next();
    if (t.kind != TokKind::kAtom) fail_expected(t, expected);
    return t;
  }

  void expect_close(Pos open, const std::string& what) {
    Token t = lexer_.next();
    if (t.kind != TokKind::kRParen) {
      fail_expected(t, "')' closing " + what + " opened at " + pos_str(open));
    }
  }

  // Consumes the ')' that ends an argument list; true if it was there.
  bool at_close(Pos open) {
    const Token& t = lexer_.peek();
    if (t.kind == TokKind::kEof) {
      fail(t.pos, "unexpected end of file: expected ')' closing '(' opened at " + pos_str(open));
    }
    if (t.kind != TokKind::kRParen) return false;
    lexer_.next();
    return true;
  }

  void skip_to_close(Pos open) {
    int64_t depth = 1;
    while (depth > 0) {
      Token t = lexer_.next();
      if (t.kind == TokKind::kEof) {
        fail(t.pos, "unexpected end of file: expected ')' closing '(' opened at " + pos_str(open));
      }
      if (t.kind == TokKind::kLParen) ++depth;
      if (t.kind == TokKind::kRParen) --depth;
    }
  }

 private:
  Lexer lexer_;
  std::string source_;
};

// VNN-LIB 2.0's commands before the asserts: the version and the networks, with the flat numbering
// of their tensors' elements (detail::TensorDeclarations).
class NetworkDeclarations {
 public:
  NetworkDeclarations(TokenReader& in, std::unordered_map<int64_t, Pos> (&declared)[2])
      : in_(in), declared_(declared) {}

  [[nodiscard]] const std::vector<NetworkDeclaration>& networks() const { return networks_; }
  [[nodiscard]] const detail::TensorDeclarations& tensors() const { return tensors_; }

  // <1.x> or <2.x>: the version read.
  int parse_version(Pos open) {
    const Token v = in_.expect_atom("a version such as <2.0>");
    const std::string_view t = v.text;
    const size_t dot = t.find('.');
    if (t.size() < 5 || t.front() != '<' || t.back() != '>' || dot == std::string_view::npos ||
        !is_decimal(t.substr(1, t.size() - 2))) {
      in_.fail(v.pos, "expected a version such as <2.0>, found " + TokenReader::describe(v));
    }
    const std::string_view major = t.substr(1, dot - 1);
    if (major != "1" && major != "2") {
      in_.fail(v.pos, "unsupported VNN-LIB version " + TokenReader::describe(v) +
                          " (1.x and 2.x are read)");
    }
    in_.expect_close(open, "vnnlib-version");
    return major == "2" ? 2 : 1;
  }

  Token expect_new_name(const std::string& what) {
    const Token name = in_.expect_atom(what);
    if (!detail::is_variable_name(name.text)) {
      in_.fail(name.pos, "expected " + what + " (a letter, then letters, digits or '_'), found " +
                             TokenReader::describe(name));
    }
    const std::string n(name.text);
    const bool is_network = std::any_of(networks_.begin(), networks_.end(),
                                        [&](const NetworkDeclaration& d) { return d.name == n; });
    if (is_network || tensors_.find(n) != nullptr) {
      in_.fail(name.pos, "'" + n + "' is already declared");
    }
    return name;
  }

  // (declare-network NAME (equal-to F)? (declare-input ...) (declare-output ...)): one input
  // and one output tensor, as the ONNX models the competition ships.
  void parse_network(Pos open) {
    NetworkDeclaration net;
    net.name = std::string(expect_new_name("a network name").text);
    int inputs = 0;
    int outputs = 0;
    while (!in_.at_close(open)) {
      const Token sub_open = in_.lexer().next();
      if (sub_open.kind != TokKind::kLParen)
        in_.fail_expected(sub_open, "'(' or ')' in declare-network");
      const Token sub = in_.expect_atom("declare-input, declare-output or equal-to");
      if (sub.text == "equal-to") {
        const Token other = in_.expect_atom("a network name");
        const auto it =
            std::find_if(networks_.begin(), networks_.end(),
                         [&](const NetworkDeclaration& d) { return d.name == other.text; });
        if (it == networks_.end())
          in_.fail(other.pos, "unknown network " + TokenReader::describe(other));
        net.equal_to = it->equal_to.empty() ? it->name : it->equal_to;
        in_.expect_close(sub_open.pos, "equal-to");
      } else if (sub.text == "declare-input" || sub.text == "declare-output") {
        const bool is_output = sub.text == "declare-output";
        if ((is_output ? outputs : inputs)++ > 0) {
          in_.fail(sub.pos, "unsupported: a network with several " +
                                std::string(is_output ? "outputs" : "inputs"));
        }
        const detail::TensorVariable& v = parse_tensor(sub_open.pos, is_output);
        (is_output ? net.output_offset : net.input_offset) = v.offset;
        (is_output ? net.num_outputs : net.num_inputs) = v.numel();
        (is_output ? net.output_name : net.input_name) = v.name;
        (is_output ? net.output_shape : net.input_shape) = v.shape;
      } else if (sub.text == "declare-hidden" || sub.text == "isomorphic-to") {
        in_.fail(sub.pos, "unsupported: " + std::string(sub.text) +
                              (sub.text == "isomorphic-to" ? " (networks of other weights)"
                                                           : " (constraints on hidden tensors)"));
      } else {
        in_.fail(sub.pos, "unknown declaration " + TokenReader::describe(sub) +
                              " (expected declare-input, declare-output or equal-to)");
      }
    }
    if (inputs == 0 || outputs == 0) {
      in_.fail(open,
               "network '" + net.name + "' declares no " + (inputs == 0 ? "input" : "output"));
    }
    networks_.push_back(std::move(net));
  }

  // NAME TYPE SHAPE ["onnx name"]): the tensor, declared.
  const detail::TensorVariable& parse_tensor(Pos open, bool is_output) {
    const Token name = expect_new_name("a tensor name");
    const Token type = in_.expect_atom("an element type (real)");
    if (!detail::is_real_type(type.text)) {
      in_.fail(type.pos, "unsupported: element type " + TokenReader::describe(type) +
                             " (expected real or a "
                             "floating-point type)");
    }
    const Token shape_tok = in_.expect_atom("a shape such as [5]");
    std::vector<int64_t> shape;
    if (std::string e = detail::parse_shape(shape_tok.text, &shape); !e.empty()) {
      in_.fail(shape_tok.pos, e + ", found " + TokenReader::describe(shape_tok));
    }
    if (in_.lexer().peek().kind == TokKind::kAtom && in_.lexer().peek().text.front() == '"') {
      // Its ONNX name ("a name" may be split at spaces): the network's only one, not needed.
      while (in_.lexer().peek().kind == TokKind::kAtom && in_.lexer().next().text.back() != '"') {
      }
    }
    in_.expect_close(open, is_output ? "declare-output" : "declare-input");
    tensors_.declare(std::string(name.text), is_output, shape);
    const detail::TensorVariable& v = *tensors_.find(std::string(name.text));
    auto& decls = declared_[is_output ? 1 : 0];
    for (int64_t k = 0; k < v.numel(); ++k) decls.emplace(v.offset + k, name.pos);
    return v;
  }

 private:
  TokenReader& in_;
  std::unordered_map<int64_t, Pos> (&declared_)[2];
  std::vector<NetworkDeclaration> networks_;
  detail::TensorDeclarations tensors_;
};

class Parser : private TokenReader {
 public:
  Parser(std::string_view text, std::string source)
      : TokenReader(text, std::move(source)), networks_(*this, declared_) {}

  VnnlibProperty parse() {
    while (lexer().peek().kind != TokKind::kEof) parse_command();
    eof_pos_ = lexer().peek().pos;
    if (version_ == 2 && networks_.networks().empty()) {
      fail(eof_pos_,
           "no network declared (expected (declare-network NAME (declare-input ...) "
           "(declare-output ...)))");
    }
    VnnlibProperty prop =
        CaseAssembly{source(), eof_pos_, declared_, networks_.tensors(), atoms_, common_, rest_}
            .assemble();
    prop.version = version_;
    prop.networks = networks_.networks();
    return prop;
  }

 private:
  // --- Top-level commands --------------------------------------------------------------------

  void parse_command() {
    Token open = lexer().next();
    if (open.kind == TokKind::kRParen) fail(open.pos, "unbalanced ')'");
    if (open.kind != TokKind::kLParen) fail_expected(open, "'(' starting a command");
    Token cmd = expect_atom("a command (declare-const or assert)");
    const bool first = !seen_command_;
    seen_command_ = true;
    if (cmd.text == "vnnlib-version") {
      if (!first) fail(cmd.pos, "vnnlib-version must be the file's first command");
      version_ = networks_.parse_version(open.pos);
    } else if (cmd.text == "declare-network") {
      if (version_ != 2) {
        fail(cmd.pos,
             "declare-network is VNN-LIB 2.0: the file must start with "
             "(vnnlib-version <2.0>)");
      }
      networks_.parse_network(open.pos);
    } else if (cmd.text == "declare-const") {
      if (version_ == 2) {
        fail(cmd.pos,
             "declare-const is VNN-LIB 1.0: a 2.0 file declares its variables in "
             "declare-network");
      }
      parse_declare(open.pos);
    } else if (cmd.text == "assert") {
      parse_assert(open.pos);
    } else if (cmd.text == "check-sat" || cmd.text == "get-model" || cmd.text == "exit" ||
               cmd.text == "set-logic" || cmd.text == "set-info" || cmd.text == "set-option") {
      skip_to_close(open.pos);  // harmless SMT-LIB commands
    } else {
      fail(cmd.pos, "unknown command " + describe(cmd) +
                        (version_ == 2 ? " (expected declare-network or assert)"
                                       : " (expected declare-const or assert)"));
    }
  }

  void parse_declare(Pos open) {
    Token name = expect_atom("a variable name");
    VarName v;
    if (!parse_var_name(name.text, &v)) {
      fail(name.pos, "unsupported: variable name " + describe(name) + " (expected X_<i> or Y_<j>)");
    }
    Token sort = expect_atom("a sort (Real)");
    if (sort.text != "Real")
      fail(sort.pos, "unsupported: sort " + describe(sort) + " (expected Real)");
    expect_close(open, "declare-const");
    auto& decls = declared_[v.is_output];
    auto [it, inserted] = decls.emplace(v.index, name.pos);
    if (!inserted) {
      fail(name.pos,
           var_str(v.is_output, v.index) + " is already declared at " + pos_str(it->second));
    }
  }

  void parse_assert(Pos open) {
    Dnf d = parse_formula(1);
    expect_close(open, "assert");
    if (d.size() == 1) {
      common_.insert(common_.end(), d[0].begin(), d[0].end());
    } else {
      rest_ = conjoin(rest_, d, open);
    }
  }

  // --- DNF operations ------------------------------------------------------------------------

  static size_t total_atoms(const Dnf& d) {
    size_t n = 0;
    for (const Term& t : d) n += t.size();
    return n;
  }

  void check_dnf_size(size_t terms, size_t atoms, Pos p) const {
    if (terms > kMaxDnfTerms) {
      fail(p, "formula too large: its disjunctive normal form has more than " +
                  std::to_string(kMaxDnfTerms) + " terms");
    }
    if (atoms > kMaxDnfAtoms) {
      fail(p, "formula too large: its disjunctive normal form has more than " +
                  std::to_string(kMaxDnfAtoms) + " comparisons in total");
    }
  }

  Dnf conjoin(const Dnf& a, const Dnf& b, Pos p) const {
    size_t terms = a.size() * b.size();  // both <= kMaxDnfTerms, so no overflow
    check_dnf_size(terms, b.size() * total_atoms(a) + a.size() * total_atoms(b), p);
    Dnf out;
    out.reserve(terms);
    for (const Term& ta : a) {
      for (const Term& tb : b) {
        Term t;
        t.reserve(ta.size() + tb.size());
        t.insert(t.end(), ta.begin(), ta.end());
        t.insert(t.end(), tb.begin(), tb.end());
        out.push_back(std::move(t));
      }
    }
    return out;
  }

  // Appends b's terms to a; `a_atoms` is a's atom count (kept by the caller, so that a long
  // disjunction is linear, not quadratic, in its terms).
  void disjoin(Dnf* a, size_t* a_atoms, Dnf&& b, Pos p) const {
    const size_t b_atoms = total_atoms(b);
    check_dnf_size(a->size() + b.size(), *a_atoms + b_atoms, p);
    for (Term& t : b) a->push_back(std::move(t));
    *a_atoms += b_atoms;
  }

  // --- Formulas ------------------------------------------------------------------------------

  Dnf parse_formula(int depth) {
    Token open = lexer().next();
    check_depth(depth, open.pos);
    if (open.kind == TokKind::kAtom && open.text == "true") return dnf_true();
    if (open.kind == TokKind::kAtom && open.text == "false") return Dnf();
    if (open.kind != TokKind::kLParen) fail_expected(open, "'(' starting a formula");
    const Token& peeked = lexer().peek();
    if (version_ == 2 &&
        !(peeked.kind == TokKind::kAtom &&
          (is_comparison(peeked.text) || peeked.text == "and" || peeked.text == "or"))) {
      return parse_infix(open.pos, depth);
    }
    Token op = lexer().next();
    if (op.kind != TokKind::kAtom) fail_expected(op, "an operator");
    if (op.text == "and" || op.text == "or") return parse_connective(op, open.pos, depth);
    if (is_comparison(op.text)) return parse_comparison(op, open.pos, depth);
    fail(op.pos,
         "unknown operator " + describe(op) + " (expected and, or, <=, >=, <, >, =, ==, !=)");
  }

  static bool is_comparison(std::string_view op) {
    return op == "<=" || op == "<" || op == ">=" || op == ">" || op == "=" || op == "==" ||
           op == "!=";
  }

  // 2.0's infix comparison (A OP B).
  Dnf parse_infix(Pos open, int depth) {
    const LinExpr a = parse_term(depth + 1);
    const Token op = expect_atom("a comparison (<=, >=, <, >, ==, !=)");
    if (!is_comparison(op.text)) {
      fail(op.pos, "expected a comparison (<=, >=, <, >, ==, !=), found " + describe(op));
    }
    const LinExpr b = parse_term(depth + 1);
    expect_close(open, "comparison");
    return compare(op.text, a, b, open);
  }

  Dnf parse_connective(const Token& op, Pos open, int depth) {
    bool is_and = op.text == "and";
    Dnf acc = is_and ? dnf_true() : Dnf();
    size_t acc_atoms = 0;  // of a disjunction's terms so far
    int64_t count = 0;
    while (!at_close(open)) {
      Pos child_pos = lexer().peek().pos;
      Dnf child = parse_formula(depth + 1);
      if (is_and) {
        acc = conjoin(acc, child, child_pos);
      } else {
        disjoin(&acc, &acc_atoms, std::move(child), child_pos);
      }
      ++count;
    }
    if (count == 0) fail(op.pos, "'" + std::string(op.text) + "' needs at least one argument");
    return acc;
  }

  Dnf parse_comparison(const Token& op, Pos open, int depth) {
    std::vector<LinExpr> args;
    while (!at_close(open)) {
      if (args.size() == 2) {
        fail(lexer().peek().pos,
             "wrong arity: '" + std::string(op.text) + "' takes 2 arguments, found a third");
      }
      args.push_back(parse_term(depth + 1));
    }
    if (args.size() != 2) {
      fail(op.pos, "wrong arity: '" + std::string(op.text) + "' takes 2 arguments, found " +
                       std::to_string(args.size()));
    }
    return compare(op.text, args[0], args[1], open);
  }

  Dnf compare(std::string_view op, const LinExpr& a, const LinExpr& b, Pos open) {
    const bool strict = op == "<" || op == ">";
    if (op == "<=" || op == "<") return make_le(a, b, open, strict);
    if (op == ">=" || op == ">") return make_le(b, a, open, strict);
    if (op == "!=") {
      Dnf either = make_le(a, b, open, true);
      size_t atoms = total_atoms(either);
      disjoin(&either, &atoms, make_le(b, a, open, true), open);
      return either;
    }
    return conjoin(make_le(a, b, open, false), make_le(b, a, open, false), open);  // =, ==
  }

  // The DNF of `lhs <= rhs` (`<` when strict); a non-constant comparison becomes one new atom.
  Dnf make_le(const LinExpr& lhs, const LinExpr& rhs, Pos p, bool strict) {
    LinExpr diff;  // lhs - rhs <= 0
    add_to(&diff, lhs, 1.0);
    add_to(&diff, rhs, -1.0);
    normalize(&diff);
    double bound = -diff.constant;  // sum coeffs * v <= bound
    if (diff.coeffs.empty()) return (strict ? bound > 0.0 : bound >= 0.0) ? dnf_true() : Dnf();
    bool has_x = false, has_y = false;
    for (const auto& kv : diff.coeffs) {
      (key_is_output(kv.first) ? has_y : has_x) = true;
      if (!std::isfinite(kv.second)) fail(p, "coefficient is not finite after simplification");
    }
    if (!std::isfinite(bound)) fail(p, "constant is not finite after simplification");
    if (has_x && has_y) {
      fail(p, "unsupported: comparison mixes input (X) and output (Y) variables");
    }
    if (has_x && diff.coeffs.size() > 1 && version_ == 2) {
      Atom a = make_output_atom(diff, bound, strict);
      a.kind = Atom::Kind::kInputRelation;
      a.pos = p;
      atoms_.push_back(std::move(a));
    } else {
      atoms_.push_back(has_x ? make_input_bound(diff, bound, p, strict)
                             : make_output_atom(diff, bound, strict));
    }
    return Dnf{Term{static_cast<int32_t>(atoms_.size() - 1)}};
  }

  Atom make_input_bound(const LinExpr& diff, double bound, Pos p, bool strict) const {
    if (diff.coeffs.size() != 1) {
      fail(p,
           "unsupported: a constraint on inputs must bound a single input variable by a "
           "constant");
    }
    auto [key, c] = diff.coeffs[0];
    Atom a;
    a.kind = c > 0 ? Atom::Kind::kInputUpper : Atom::Kind::kInputLower;
    a.input = key_index(key);
    a.value = bound / c;
    if (!std::isfinite(a.value)) {
      fail(p, "bound on " + networks_.tensors().name_of(false, a.input) + " is not finite");
    }
    // x < c as x <= the double below c: every counterexample then satisfies it strictly.
    if (strict) a.value = std::nextafter(a.value, c > 0 ? -kInf : kInf);
    return a;
  }

  static Atom make_output_atom(const LinExpr& diff, double bound, bool strict) {
    Atom a;
    a.kind = Atom::Kind::kOutput;
    a.strict = strict;
    a.value = bound;
    for (const auto& kv : diff.coeffs) a.coeffs.emplace_back(key_index(kv.first), kv.second);
    return a;
  }

  // --- Terms ---------------------------------------------------------------------------------

  LinExpr parse_term(int depth) {
    Token t = lexer().next();
    check_depth(depth, t.pos);
    if (t.kind == TokKind::kAtom) return parse_leaf(t);
    if (t.kind != TokKind::kLParen) fail_expected(t, "a number, variable or '('");
    Token op = lexer().next();
    if (op.kind != TokKind::kAtom) fail_expected(op, "an operator");
    if (op.text != "+" && op.text != "-" && op.text != "*") {
      fail(op.pos, "unknown operator " + describe(op) + " in a term (expected +, - or *)");
    }
    std::vector<LinExpr> args;
    while (!at_close(t.pos)) args.push_back(parse_term(depth + 1));
    if (args.empty()) fail(op.pos, "wrong arity: '" + std::string(op.text) + "' needs arguments");
    LinExpr out = op.text == "*" ? multiply(op, &args) : add_or_subtract(op, args);
    out.pos = t.pos;
    return out;
  }

  LinExpr parse_leaf(const Token& t) {
    LinExpr e;
    e.pos = t.pos;
    if (looks_numeric(t.text)) {
      e.constant = parse_number(t);
      return e;
    }
    if (version_ == 2) {
      e.coeffs.emplace_back(tensor_element_key(t), 1.0);
      return e;
    }
    VarName v;
    if (!parse_var_name(t.text, &v)) fail_expected(t, "a number or a variable");
    auto it = declared_[v.is_output].find(v.index);
    if (it == declared_[v.is_output].end()) {
      fail(t.pos, "undeclared variable " + describe(t));
    }
    e.coeffs.emplace_back(var_key(v), 1.0);
    return e;
  }

  // The variable key of a 2.0 element "X[0, 3]" (or a scalar tensor "X").
  int64_t tensor_element_key(const Token& t) const {
    std::string name;
    std::vector<int64_t> indices;
    if (std::string e = detail::split_indexed(t.text, &name, &indices); !e.empty()) fail(t.pos, e);
    const detail::TensorDeclarations& tensors = networks_.tensors();
    const detail::TensorVariable* v = tensors.find(name);
    if (v == nullptr) {
      if (!detail::is_variable_name(name)) fail_expected(t, "a number or a variable");
      fail(t.pos, "undeclared variable '" + name + "'");
    }
    std::string error;
    const std::optional<int64_t> flat = tensors.flat(*v, indices, &error);
    if (!flat) fail(t.pos, error);
    return var_key(VarName{v->is_output, *flat});
  }

  double parse_number(const Token& t) const {
    if (!is_decimal(t.text)) fail(t.pos, "bad number " + describe(t));
    std::string s(t.text);
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) fail(t.pos, "bad number " + describe(t));
    if (errno == ERANGE && std::isinf(v)) fail(t.pos, "number out of range " + describe(t));
    return v;
  }

  static LinExpr add_or_subtract(const Token& op, const std::vector<LinExpr>& args) {
    LinExpr out;
    if (op.text == "-" && args.size() == 1) {
      add_to(&out, args[0], -1.0);
      return out;
    }
    for (size_t i = 0; i < args.size(); ++i) {
      add_to(&out, args[i], (op.text == "-" && i > 0) ? -1.0 : 1.0);
    }
    return out;
  }

  // Product where at most one factor has variables.
  LinExpr multiply(const Token& op, std::vector<LinExpr>* args) const {
    if (args->size() < 2) fail(op.pos, "wrong arity: '*' takes at least 2 arguments, found 1");
    double factor = 1.0;
    LinExpr* linear = nullptr;
    for (LinExpr& e : *args) {
      normalize(&e);
      if (e.coeffs.empty()) {
        factor *= e.constant;
      } else if (linear == nullptr) {
        linear = &e;
      } else {
        fail(e.pos, "unsupported: non-linear term (product of two variable expressions)");
      }
    }
    LinExpr out;
    if (linear == nullptr) {
      out.constant = factor;
      return out;
    }
    out = std::move(*linear);
    scale(&out, factor);
    return out;
  }

  Pos eof_pos_;
  std::unordered_map<int64_t, Pos> declared_[2];  // [is_output]: index -> declaration position
  int version_ = 1;
  bool seen_command_ = false;
  NetworkDeclarations networks_;  // 2.0
  std::vector<Atom> atoms_;
  Term common_;        // atoms of asserts whose DNF is a single term
  Dnf rest_ = Dnf(1);  // product of the other asserts' DNFs
};

}  // namespace

std::string element_name(const VnnlibProperty& property, bool is_output, int64_t index) {
  for (const NetworkDeclaration& n : property.networks) {
    const int64_t offset = is_output ? n.output_offset : n.input_offset;
    const int64_t count = is_output ? n.num_outputs : n.num_inputs;
    if (index < offset || index >= offset + count) continue;
    return detail::element_string(is_output ? n.output_name : n.input_name,
                                  is_output ? n.output_shape : n.input_shape, index - offset);
  }
  return std::string(is_output ? "Y_" : "X_") + std::to_string(index);
}

VnnlibProperty parse_vnnlib_string(const std::string& text, const std::string& source_name) {
  return Parser(text, source_name).parse();
}

VnnlibProperty parse_vnnlib_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error("cannot read VNNLIB file '" + path + "': it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot open VNNLIB file '" + path + "': " + std::strerror(errno));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("error reading VNNLIB file '" + path + "'");
  return parse_vnnlib_string(text, path);
}

}  // namespace distcrown::io
