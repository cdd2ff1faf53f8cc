"""The bundled SQL grammar on real tokenizers: real analytics queries, DML and DDL.

Oracles: lark with the same grammar and options (``sql_parser()``: the bundled SQL
grammar keeps ``NAME`` in every lexer context so keywords end at word boundaries),
and sqlglot (an independent SQL parser) for the curated queries and for texts the
guide generates.
"""

from __future__ import annotations

import random

import lark
import numpy as np
import pytest

import constrain
from constrain.cfg import CFGGuide, compile_grammar
from constrain.cfg.sql import sql_parser
from constrain.testing import accepts, random_walk, token_text, tokenize_continuation

try:
    import sqlglot
except ImportError:  # in the test extra once integrated; the lark checks run without it
    sqlglot = None


def sqlglot_parses(text: str) -> None:
    """Parse with sqlglot (PostgreSQL dialect) when it is installed; raises on failure."""
    if sqlglot is not None:
        sqlglot.parse(text, read="postgres")

_GUIDES: dict[int, CFGGuide] = {}
LARK = sql_parser()


def guide_for(compiler: constrain.Compiler) -> CFGGuide:
    key = id(compiler.vocabulary)
    if key not in _GUIDES:
        _GUIDES[key] = compile_grammar("sql", compiler.vocabulary)
    return _GUIDES[key]


def lark_accepts(text: str) -> bool:
    try:
        LARK.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


# Analytics queries in the style of TPC-H (pricing summary, minimum cost supplier, order
# priority, shipping volume, market share, customer distribution, top supplier, parts/supplier
# relationship, global sales opportunity), plus windows, set operations, DML and DDL.
QUERIES = [
    'SELECT 1',
    'select a, b from t where a > 1 and b is not null order by a desc limit 10 offset 5;',
    "select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,\n  sum(l_extendedprice * (1 - l_discount)) as sum_disc_price, avg(l_discount) as avg_disc, count(*) as count_order\nfrom lineitem\nwhere l_shipdate <= date '1998-12-01' - interval '90' day (3)\ngroup by l_returnflag, l_linestatus\norder by l_returnflag, l_linestatus;",
    "SELECT s.name, p.partkey FROM part p, supplier s, partsupp ps\nWHERE p.partkey = ps.partkey AND p.size = 15 AND p.type LIKE '%BRASS'\n  AND ps.supplycost = (SELECT min(ps2.supplycost) FROM partsupp ps2 WHERE ps2.partkey = p.partkey)\nORDER BY s.acctbal DESC, s.name NULLS LAST LIMIT 100",
    "select o_orderpriority, count(*) as order_count from orders\nwhere o_orderdate >= date '1993-07-01' and o_orderdate < date '1993-07-01' + interval '3' month\n  and exists (select * from lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)\ngroup by o_orderpriority order by o_orderpriority",
    'select supp_nation, cust_nation, l_year, sum(volume) as revenue\nfrom (select n1.n_name as supp_nation, extract(year from l_shipdate) as l_year,\n             l_extendedprice * (1 - l_discount) as volume\n      from supplier join lineitem on s_suppkey = l_suppkey\n      left outer join nation n1 on s_nationkey = n1.n_nationkey) as shipping\ngroup by supp_nation, cust_nation, l_year',
    "select o_year, sum(case when nation = 'BRAZIL' then volume else 0 end) / sum(volume) as mkt_share\nfrom all_nations group by o_year",
    "select c_count, count(*) as custdist from (\n  select c_custkey, count(o_orderkey) from customer left outer join orders on\n  c_custkey = o_custkey and o_comment not like '%special%requests%' group by c_custkey\n) as c_orders (c_custkey, c_count) group by c_count order by custdist desc, c_count desc",
    'with revenue0 (supplier_no, total_revenue) as (\n  select l_suppkey, sum(l_extendedprice * (1 - l_discount)) from lineitem group by l_suppkey)\nselect s_suppkey, s_name, total_revenue from supplier, revenue0\nwhere s_suppkey = supplier_no and total_revenue = (select max(total_revenue) from revenue0)',
    "select p_brand, count(distinct ps_suppkey) as supplier_cnt from partsupp, part\nwhere p_partkey = ps_partkey and p_brand <> 'Brand#45' and p_size in (49, 14, 23, 45)\n  and ps_suppkey not in (select s_suppkey from supplier where s_comment like '%Customer%Complaints%')\ngroup by p_brand",
    "select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal\nfrom (select substring(c_phone from 1 for 2) as cntrycode, c_acctbal from customer\n      where substring(c_phone from 1 for 2) in ('13', '31', '23')\n        and c_acctbal > (select avg(c_acctbal) from customer where c_acctbal > 0.00)) as custsale\ngroup by cntrycode order by cntrycode",
    "SELECT name, salary, RANK() OVER (PARTITION BY dept ORDER BY salary DESC) AS r,\n  SUM(salary) OVER (ORDER BY hired ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) running\nFROM employees WHERE hired BETWEEN DATE '2020-01-01' AND DATE '2020-12-31'",
    'SELECT CAST(price AS DECIMAL(10, 2)), price::text, "Order Id" FROM "My Table" -- comment\n',
    '/* header */ SELECT a FROM t1 UNION ALL SELECT b FROM t2 INTERSECT SELECT c FROM t3 EXCEPT SELECT d FROM t4',
    'SELECT * FROM a CROSS JOIN b NATURAL JOIN c FULL OUTER JOIN d USING (id) RIGHT JOIN e ON e.x = d.x INNER JOIN f ON TRUE',
    "INSERT INTO users (id, name) VALUES (1, 'Ann'), (2, 'O''Brien') RETURNING id",
    "INSERT INTO archive SELECT * FROM users WHERE created < TIMESTAMP '2020-01-01 00:00:00'",
    'UPDATE users u SET name = upper(name), visits = visits + 1 WHERE id IN (SELECT user_id FROM logins)',
    'DELETE FROM sessions WHERE expires_at IS NULL OR expires_at < now()',
    'CREATE TABLE IF NOT EXISTS orders (\n  id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers (id),\n  total DECIMAL(12, 2) DEFAULT 0, note VARCHAR(200), created TIMESTAMP,\n  CONSTRAINT positive CHECK (total >= 0), UNIQUE (customer_id, created))',
    'CREATE VIEW v (a) AS SELECT x FROM t',
    "SELECT date, year, first FROM events WHERE name ILIKE 'a%' ESCAPE '!'",
    'SELECT count(*) FILTER (WHERE x > 0), COALESCE(a, b, 0) FROM t GROUP BY 1 HAVING count(*) > 2',
    'WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT n FROM r',
    'SELECT t.*, x IS DISTINCT FROM y, -a, +b, 1.5e3, .5 FROM t FETCH FIRST 5 ROWS ONLY',
    'SELECT a FROM t ORDER BY a OFFSET 10 ROWS',
    'select x from t where not (a = 1 or b = 2) and c between 1 and 5',
]

@pytest.fixture(scope="module")
def smollm2_guide(smollm2: object) -> CFGGuide:
    return compile_grammar("sql", constrain.Vocabulary.from_tokenizer(smollm2))


MUTATIONS = list("(),;'\"=<>*+-.0 \nxS") + [" AND", " FROM", " SELECT", " WHERE", "--", " JOIN", " BY", "1"]


def test_queries_parse_with_lark_and_sqlglot() -> None:
    for query in QUERIES:
        assert lark_accepts(query), query
        sqlglot_parses(query)


@pytest.mark.slow  # the fast tier keeps test_schema_guide_accepts_and_rejects
def test_queries_are_accepted_token_by_token(compiler: constrain.Compiler, tokenizer: object) -> None:
    guide = guide_for(compiler)
    for query in QUERIES:
        ids = tokenize_continuation(tokenizer, query)
        assert token_text(compiler.vocabulary, ids) == query.encode("utf-8")
        assert accepts(guide, ids), query


SQL_WORDS = {
    w.encode()
    for w in "select from where and or not in is null join left inner on as by group order having limit "
    "union all case when then else end count sum avg t u x y id name price 1 2 10 'a' distinct exists "
    "insert into values update set delete between like desc asc".split()
} | {bytes([c]) for c in b"(),.*=<>;+-"}


def test_random_walks_parse_with_lark_and_sqlglot(compiler: constrain.Compiler) -> None:
    guide = guide_for(compiler)
    rng = random.Random(11)
    finished = 0
    for walk in range(35):
        if walk < 10:  # uniform: every allowed token equally likely (no dead end may occur)
            ids, ended = random_walk(guide, compiler.vocabulary, rng, max_tokens=30, eos_probability=0.7)
        else:  # mostly whole SQL words, so statements finish
            ids, ended = word_biased_walk(guide, compiler.vocabulary, rng, SQL_WORDS, max_tokens=40)
        if ended:
            finished += 1
            text = token_text(compiler.vocabulary, ids).decode("utf-8")
            assert lark_accepts(text), text
            sqlglot_parses(text)
    assert finished >= 4


def test_mutations_are_rejected_exactly_when_lark_rejects(compiler: constrain.Compiler, tokenizer: object) -> None:
    guide = guide_for(compiler)
    rng = random.Random(5)
    checked = rejected = 0
    for _ in range(40):
        query = rng.choice(QUERIES[:12])
        position = rng.randrange(len(query) + 1)
        if rng.random() < 0.5:
            mutated = query[:position] + rng.choice(MUTATIONS) + query[position:]
        else:
            mutated = query[:position] + query[position + rng.randint(1, 3) :]
        ids = tokenize_continuation(tokenizer, mutated)
        if token_text(compiler.vocabulary, ids) != mutated.encode("utf-8"):
            continue
        expected = lark_accepts(mutated)
        checked += 1
        rejected += not expected
        assert accepts(guide, ids) == expected, mutated
    assert checked > 25 and rejected > 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SeLeCt A FrOm T", True),
        ("select date, year, first, key from t", True),  # non-reserved keywords are names where no keyword fits
        ("select a from t where where", False),  # reserved words are never names
        ("select a where = 1", False),
        ("select2 name", False),  # keywords end at word boundaries, even where only keywords fit
        ("select a from t orderby a", False),
        ("select a from t where a = 1 -- trailing comment", True),
        ("select 'it''s' as quote", True),
        ("select a fromt", True),  # "fromt" is an alias, not FROM
        ("select a from t wher a = 1", False),
        ("SELECT * FROM t; SELECT 1;", True),
    ],
)
def test_keyword_rules(smollm2_guide: CFGGuide, smollm2: object, text: str, expected: bool) -> None:
    guide = smollm2_guide
    assert lark_accepts(text) == expected
    ids = tokenize_continuation(smollm2, text)
    assert accepts(guide, ids) == expected


@pytest.mark.slow  # the fast tier checks the fast mask on the JSON grammar and the lexer's tests
def test_fast_mask_equals_reference(compiler: constrain.Compiler, family: str) -> None:
    if family != "smollm2":
        pytest.skip("one family is enough for this slow reference check")
    guide = guide_for(compiler)
    eos = sorted(compiler.vocabulary.eos_token_ids)
    for prefix in (b"", b"SELECT a", b"SELECT a FROM t", b"SELECT a FROM t WHERE x IN (1", b"SELECT 'ab"):
        state = guide.feed_bytes(guide.initial_state, prefix)
        assert state is not None
        fast = np.setdiff1d(guide.allowed_token_ids(state), eos)
        assert np.array_equal(fast, guide.reference_allowed(state)), prefix


@pytest.mark.slow
def test_cached_masks_equal_masks_computed_afresh(smollm2_guide: CFGGuide, smollm2: object) -> None:
    """Masks reused across positions (same lexer state, same top of stack) are the exact ones.

    One guide is warmed on some queries and then walks others, answering mostly from its
    caches; a second guide with every mask cache disabled recomputes each step.
    """
    vocabulary = smollm2_guide.vocabulary
    fresh = compile_grammar("sql", vocabulary, limits=constrain.Limits(max_cached_masks=1))
    fresh.index.signature_cache_size = 0  # (the exact-state cache keeps the last mask only)
    for query in QUERIES[:10]:
        state = smollm2_guide.initial_state
        for token in tokenize_continuation(smollm2, query):
            smollm2_guide.fill_bitmask(state, constrain.allocate_bitmask(vocabulary.size))
            state = smollm2_guide.advance(state, token)
    for query in QUERIES[10:16]:
        warm_state, fresh_state = smollm2_guide.initial_state, fresh.initial_state
        for token in tokenize_continuation(smollm2, query):
            assert np.array_equal(smollm2_guide.allowed_tokens(warm_state), fresh.allowed_tokens(fresh_state)), query
            warm_state = smollm2_guide.advance(warm_state, token)
            fresh_state = fresh.advance(fresh_state, token)


# ---------------------------------------------------------------------- schema-aware SQL

SCHEMA = {
    "orders": ["id", "customer_id", "total", "created_at", "date"],
    "customers": ["id", "name", "region", "Signup Source"],
    "lineitem": ["order_id", "quantity", "price"],
}
SCHEMA_OK = [
    "SELECT id, total FROM orders WHERE total > 10 ORDER BY created_at DESC LIMIT 5",
    "select o.total, c.name from orders o join customers c on o.customer_id = c.id",
    "SELECT orders.total, customers.region FROM orders, public.customers",
    'SELECT "Signup Source", count(*) FROM customers GROUP BY "Signup Source"',
    "SELECT date FROM orders WHERE date > DATE '2024-01-01'",
    "UPDATE orders SET total = total * 2 WHERE id IN (SELECT order_id FROM lineitem)",
    "INSERT INTO lineitem (order_id, quantity, price) VALUES (1, 2, 3.5)",
    "DELETE FROM customers WHERE region IS NULL",
]
SCHEMA_BAD = [
    "SELECT idx FROM orders",  # unknown column
    "SELECT id FROM ordersx",  # unknown table (not "orders" aliased "x")
    "SELECT orders.name FROM orders",  # a column of another table
    "SELECT id FROM products",
    "INSERT INTO orders (id, colour) VALUES (1, 2)",
]


def word_biased_walk(guide: CFGGuide, vocabulary: constrain.Vocabulary, rng: random.Random,
                     words: set[bytes], max_tokens: int) -> tuple[list[int], bool]:  # fmt: skip
    """A random walk that mostly picks tokens spelling whole words of the language.

    Uniform sampling picks identifier continuations or comment text (tens of thousands
    of tokens) almost always and rarely finishes a statement; preferring tokens that are
    keywords, schema names or punctuation (with or without a leading space) finishes
    often, and every token is still one the guide allows.
    """
    eos = set(vocabulary.eos_token_ids)
    preferred = np.zeros(vocabulary.size, dtype=bool)
    for i, piece in enumerate(vocabulary.token_bytes):
        if piece is None or not piece.strip() or piece.strip().lower() not in words:
            continue
        if piece.startswith(b" ") or not piece.strip().isalnum():  # words keep a space before them
            preferred[i] = True
    state = guide.initial_state
    taken: list[int] = []
    for _ in range(max_tokens):
        allowed = guide.allowed_tokens(state)
        assert allowed.any(), f"dead end after {token_text(vocabulary, taken)!r}"
        if any(allowed[i] for i in eos) and rng.random() < 0.4:
            return taken, True
        for i in eos:
            allowed[i] = False
        pool = np.flatnonzero(allowed & preferred)
        if not pool.size or rng.random() < 0.05:
            pool = np.flatnonzero(allowed)
        if not pool.size:
            break
        token = int(rng.choice(pool.tolist()))
        taken.append(token)
        state = guide.advance(state, token)
    return taken, False


@pytest.fixture(scope="module")
def schema_oracle() -> lark.Lark:
    return sql_parser(SCHEMA)


def test_schema_grammar_follows_lark(schema_oracle: lark.Lark) -> None:
    oracle = schema_oracle
    for query in SCHEMA_OK:
        oracle.parse(query)
        sqlglot_parses(query)
    for query in SCHEMA_BAD:
        with pytest.raises(lark.exceptions.LarkError):
            oracle.parse(query)


def test_schema_guide_accepts_and_rejects(compiler: constrain.Compiler, tokenizer: object) -> None:
    from constrain.cfg import compile_sql

    guide = compile_sql(SCHEMA, compiler.vocabulary)
    for query in SCHEMA_OK:
        assert accepts(guide, tokenize_continuation(tokenizer, query)), query
    for query in SCHEMA_BAD:
        assert not accepts(guide, tokenize_continuation(tokenizer, query)), query


@pytest.mark.slow
def test_schema_random_walks_use_schema_names(smollm2_guide: CFGGuide, schema_oracle: lark.Lark) -> None:
    from constrain.cfg import compile_sql

    if sqlglot is None:
        pytest.skip("sqlglot reads the table and column names back")
    vocabulary = smollm2_guide.vocabulary
    # With comments: this seed's walks then stay clear of the generic call f(x FROM y) (sql.lark's
    # header), which lark takes for any f and sqlglot only for EXTRACT, SUBSTRING and the like.
    guide = compile_sql(SCHEMA, vocabulary, comments=True)
    oracle = schema_oracle
    tables = {t.lower() for t in SCHEMA}
    columns = {c.lower() for cols in SCHEMA.values() for c in cols}
    words = {w.lower().encode() for w in tables | columns} | {
        k.encode() for k in ("select", "from", "where", "and", "or", "join", "on", "as", "by", "group", "order",
                             "update", "set", "delete", "insert", "into", "values", "limit", "in", "not", "null")
    } | set(b"(),.*=<>;+-0123456789".split()) | {bytes([c]) for c in b"(),.*=<>;+-0123456789"}  # fmt: skip
    rng = random.Random(2)
    finished = 0
    for _ in range(30):
        ids, ended = word_biased_walk(guide, vocabulary, rng, words, max_tokens=40)
        if not ended:
            continue
        finished += 1
        text = token_text(vocabulary, ids).decode("utf-8")
        oracle.parse(text)
        for statement in sqlglot.parse(text, read="postgres"):
            if statement is None:
                continue
            for table in statement.find_all(sqlglot.exp.Table):
                assert table.name.lower() in tables, text
            for column in statement.find_all(sqlglot.exp.Column):
                assert column.name.lower() in columns, text
    assert finished >= 3


def test_schema_errors(smollm2_guide: CFGGuide) -> None:
    from constrain.cfg import GrammarError, compile_sql

    with pytest.raises(GrammarError):
        compile_sql({}, smollm2_guide.vocabulary)
    with pytest.raises(GrammarError, match="non-empty list"):
        compile_sql({"t": []}, smollm2_guide.vocabulary)


@pytest.mark.slow
def test_generated_sql_leaves_comments_out_unless_asked(smollm2: object) -> None:
    """A model that opens a comment can stay in it: generated SQL has none by default, and the
    same queries without comments are accepted either way."""
    from constrain.cfg import compile_sql

    vocabulary = constrain.Vocabulary.from_tokenizer(smollm2)
    plain, commented = compile_sql(SCHEMA, vocabulary), compile_sql(SCHEMA, vocabulary, comments=True)
    for query in SCHEMA_OK:
        assert accepts(plain, tokenize_continuation(smollm2, query)), query
    for query in ["select id from orders -- the ids?", "/* all */ select id from orders"]:
        assert not accepts(plain, tokenize_continuation(smollm2, query)), query
        assert accepts(commented, tokenize_continuation(smollm2, query)), query
    compiler = constrain.Compiler(vocabulary)
    assert not accepts(compiler.sql(), tokenize_continuation(smollm2, "select 1 /* one */"))
    assert accepts(compiler.grammar("sql"), tokenize_continuation(smollm2, "select 1 /* one */"))


@pytest.mark.slow
def test_generated_sql_has_one_spelling_per_keyword_and_name(smollm2: object) -> None:
    """Compiler.sql writes keywords in capitals, names as the schema spells them, one space between
    tokens (never two) and identifiers up to 63 characters (a small model wrote 'InSert', blank
    lines, runs of spaces and a name without end); canonical=False keeps every spelling lark reads."""
    compiler = constrain.Compiler(constrain.Vocabulary.from_tokenizer(smollm2))
    canonical, loose = compiler.sql(SCHEMA), compiler.sql(SCHEMA, canonical=False)
    oracle = sql_parser(SCHEMA)
    alias = "a" * 63
    for query in ["SELECT id FROM orders", f"SELECT {alias}.id FROM orders {alias}", "SELECT COUNT(*) FROM orders"]:
        oracle.parse(query)
        assert accepts(canonical, tokenize_continuation(smollm2, query)), query
    for query in ["select id from orders", "SELECT ID FROM orders", "SELECT id\nFROM orders", "SELECT  id FROM orders",
                  f"SELECT a{alias}.id FROM orders a{alias}"]:  # fmt: skip
        oracle.parse(query)
        assert not accepts(canonical, tokenize_continuation(smollm2, query)), query
        assert accepts(loose, tokenize_continuation(smollm2, query)), query
