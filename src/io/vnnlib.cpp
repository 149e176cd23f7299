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

namespace distcrown::io {
namespace {

constexpr size_t kMaxDnfTerms = 100000;
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
    size_t start = i_;
    while (i_ < text_.size() && !is_delimiter(text_[i_])) advance();
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
  enum class Kind { kInputLower, kInputUpper, kOutput } kind = Kind::kOutput;
  int64_t input = 0;                                      // input bounds: X index
  double value = 0.0;                                     // input bounds: the bound; outputs: rhs
  std::vector<std::pair<int64_t, double>> output_coeffs;  // outputs: (Y index, coefficient)
};

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
               const std::vector<Atom>& atoms, const Term& common, const Dnf& rest)
      : source_(source),
        eof_pos_(eof_pos),
        declared_(declared),
        atoms_(atoms),
        common_(common),
        rest_(rest) {}

  VnnlibProperty assemble() const {
    VnnlibProperty prop;
    prop.source = source_;
    prop.num_inputs = check_declarations(false);
    prop.num_outputs = check_declarations(true);
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
    fail(stray->second, var_str(is_output, stray->first) + " is declared but " +
                            var_str(is_output, missing) +
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
      std::string msg = var_str(false, static_cast<int64_t>(i)) + " has no " +
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
    for (const auto& [index, coeff] : a.output_coeffs) c.coeffs[static_cast<size_t>(index)] = coeff;
    c.rhs = a.value;
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
  const std::vector<Atom>& atoms_;
  const Term& common_;
  const Dnf& rest_;
};

class Parser {
 public:
  Parser(std::string_view text, std::string source) : lexer_(text), source_(std::move(source)) {}

  VnnlibProperty parse() {
    while (lexer_.peek().kind != TokKind::kEof) parse_command();
    eof_pos_ = lexer_.peek().pos;
    return CaseAssembly{source_, eof_pos_, declared_, atoms_, common_, rest_}.assemble();
  }

 private:
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

  // --- Top-level commands --------------------------------------------------------------------

  void parse_command() {
    Token open = lexer_.next();
    if (open.kind == TokKind::kRParen) fail(open.pos, "unbalanced ')'");
    if (open.kind != TokKind::kLParen) fail_expected(open, "'(' starting a command");
    Token cmd = expect_atom("a command (declare-const or assert)");
    if (cmd.text == "declare-const") {
      parse_declare(open.pos);
    } else if (cmd.text == "assert") {
      parse_assert(open.pos);
    } else if (cmd.text == "check-sat" || cmd.text == "get-model" || cmd.text == "exit" ||
               cmd.text == "set-logic" || cmd.text == "set-info" || cmd.text == "set-option") {
      skip_to_close(open.pos);  // harmless SMT-LIB commands
    } else {
      fail(cmd.pos, "unknown command " + describe(cmd) + " (expected declare-const or assert)");
    }
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

  void disjoin(Dnf* a, Dnf&& b, Pos p) const {
    check_dnf_size(a->size() + b.size(), total_atoms(*a) + total_atoms(b), p);
    for (Term& t : b) a->push_back(std::move(t));
  }

  // --- Formulas ------------------------------------------------------------------------------

  Dnf parse_formula(int depth) {
    Token open = lexer_.next();
    check_depth(depth, open.pos);
    if (open.kind == TokKind::kAtom && open.text == "true") return dnf_true();
    if (open.kind == TokKind::kAtom && open.text == "false") return Dnf();
    if (open.kind != TokKind::kLParen) fail_expected(open, "'(' starting a formula");
    Token op = lexer_.next();
    if (op.kind != TokKind::kAtom) fail_expected(op, "an operator");
    if (op.text == "and" || op.text == "or") return parse_connective(op, open.pos, depth);
    if (op.text == "<=" || op.text == "<" || op.text == ">=" || op.text == ">" || op.text == "=") {
      return parse_comparison(op, open.pos, depth);
    }
    fail(op.pos, "unknown operator " + describe(op) + " (expected and, or, <=, >=, <, >, =)");
  }

  Dnf parse_connective(const Token& op, Pos open, int depth) {
    bool is_and = op.text == "and";
    Dnf acc = is_and ? dnf_true() : Dnf();
    int64_t count = 0;
    while (!at_close(open)) {
      Pos child_pos = lexer_.peek().pos;
      Dnf child = parse_formula(depth + 1);
      if (is_and) {
        acc = conjoin(acc, child, child_pos);
      } else {
        disjoin(&acc, std::move(child), child_pos);
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
        fail(lexer_.peek().pos,
             "wrong arity: '" + std::string(op.text) + "' takes 2 arguments, found a third");
      }
      args.push_back(parse_term(depth + 1));
    }
    if (args.size() != 2) {
      fail(op.pos, "wrong arity: '" + std::string(op.text) + "' takes 2 arguments, found " +
                       std::to_string(args.size()));
    }
    const LinExpr& a = args[0];
    const LinExpr& b = args[1];
    if (op.text == "<=" || op.text == "<") return make_le(a, b, open);
    if (op.text == ">=" || op.text == ">") return make_le(b, a, open);
    return conjoin(make_le(a, b, open), make_le(b, a, open), open);  // "="
  }

  // The DNF of `lhs <= rhs`; a non-constant comparison becomes one new atom.
  Dnf make_le(const LinExpr& lhs, const LinExpr& rhs, Pos p) {
    LinExpr diff;  // lhs - rhs <= 0
    add_to(&diff, lhs, 1.0);
    add_to(&diff, rhs, -1.0);
    normalize(&diff);
    double bound = -diff.constant;  // sum coeffs * v <= bound
    if (diff.coeffs.empty()) return bound >= 0.0 ? dnf_true() : Dnf();
    bool has_x = false, has_y = false;
    for (const auto& kv : diff.coeffs) {
      (key_is_output(kv.first) ? has_y : has_x) = true;
      if (!std::isfinite(kv.second)) fail(p, "coefficient is not finite after simplification");
    }
    if (!std::isfinite(bound)) fail(p, "constant is not finite after simplification");
    if (has_x && has_y) {
      fail(p, "unsupported: comparison mixes input (X) and output (Y) variables");
    }
    atoms_.push_back(has_x ? make_input_bound(diff, bound, p) : make_output_atom(diff, bound));
    return Dnf{Term{static_cast<int32_t>(atoms_.size() - 1)}};
  }

  Atom make_input_bound(const LinExpr& diff, double bound, Pos p) const {
    if (diff.coeffs.size() != 1) {
      fail(p, "unsupported: a constraint on inputs must bound a single X variable by a constant");
    }
    auto [key, c] = diff.coeffs[0];
    Atom a;
    a.kind = c > 0 ? Atom::Kind::kInputUpper : Atom::Kind::kInputLower;
    a.input = key_index(key);
    a.value = bound / c;
    if (!std::isfinite(a.value)) fail(p, "bound on " + var_str(false, a.input) + " is not finite");
    return a;
  }

  static Atom make_output_atom(const LinExpr& diff, double bound) {
    Atom a;
    a.kind = Atom::Kind::kOutput;
    a.value = bound;
    for (const auto& kv : diff.coeffs) a.output_coeffs.emplace_back(key_index(kv.first), kv.second);
    return a;
  }

  // --- Terms ---------------------------------------------------------------------------------

  LinExpr parse_term(int depth) {
    Token t = lexer_.next();
    check_depth(depth, t.pos);
    if (t.kind == TokKind::kAtom) return parse_leaf(t);
    if (t.kind != TokKind::kLParen) fail_expected(t, "a number, variable or '('");
    Token op = lexer_.next();
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
    VarName v;
    if (!parse_var_name(t.text, &v)) fail_expected(t, "a number or a variable");
    auto it = declared_[v.is_output].find(v.index);
    if (it == declared_[v.is_output].end()) {
      fail(t.pos, "undeclared variable " + describe(t));
    }
    e.coeffs.emplace_back(var_key(v), 1.0);
    return e;
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

  Lexer lexer_;
  std::string source_;
  Pos eof_pos_;
  std::unordered_map<int64_t, Pos> declared_[2];  // [is_output]: index -> declaration position
  std::vector<Atom> atoms_;
  Term common_;        // atoms of asserts whose DNF is a single term
  Dnf rest_ = Dnf(1);  // product of the other asserts' DNFs
};

}  // namespace

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
