/* SPDX-License-Identifier: MIT */
/* tests/test_online.c: on-line tuning's races (runtime/online.c), run with a
 * timer of the test's own: which candidate runs, when a time counts, that
 * the least time wins, and that lost or unrecorded samples never decide;
 * and kt_online's arguments. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kt_internal.h"
#include "kt_test.h"

/* Fake events: a pair per slot, as the race asks; the test records them
 * (recorded), completes them (ready, with ms) or loses them (lost). */
typedef struct fake_event {
  int made, recorded, ready, lost, queried_unrecorded;
  float ms;
} fake_event;

typedef struct fake_timer {
  fake_event ev[64];
  int used, destroyed, fail_create;
} fake_timer;

static int fake_create(void *user, void **start, void **stop)
{
  fake_timer *f = user;
  if (f->fail_create || f->used + 2 > 64)
    return -1;
  *start = &f->ev[f->used++];
  *stop = &f->ev[f->used++];
  ((fake_event *)*stop)->made = 1;
  return 0;
}

static int fake_query(void *user, void *start, void *stop, float *ms)
{
  (void)user, (void)start;
  fake_event *e = stop;
  if (!e->recorded) {
    e->queried_unrecorded = 1;
    return 1; /* as CUDA answers for an event never recorded: done */
  }
  if (e->lost)
    return -1;
  if (!e->ready)
    return 0;
  *ms = e->ms;
  return 1;
}

static void fake_destroy(void *user, void *start, void *stop)
{
  (void)start, (void)stop;
  ((fake_timer *)user)->destroyed += 2;
}

static kt_race *race_with(fake_timer *f, int candidates)
{
  memset(f, 0, sizeof *f);
  const kt_race_timer t = {f, fake_create, fake_query, fake_destroy};
  kt_race *r = kt_race_new(&t, candidates);
  cr_assert_not_null(r);
  return r;
}

static const uint64_t KEY = 0x1234567ull;
static const int VARIANTS[] = {40, 41, 42, 43};
static const double PREDICTED[] = {1.0, 1.1, 1.2, 1.2};

/* One call: begin (adding the race if new); where it gets a sample, record
 * it and complete it with the time that times(candidate variant, sample)
 * gives (< 0: lose it).  Returns the state; *variant is what ran. */
typedef float (*times_fn)(int variant, int sample);
static int call(kt_race *r, int n, times_fn times, int *variant, int complete)
{
  static int sample;
  kt_race_pick p;
  int st = kt_race_begin(r, KEY, &p);
  if (st == KT_RACE_UNKNOWN)
    st = kt_race_add(r, KEY, n, VARIANTS, PREDICTED, &p);
  *variant = p.variant;
  if (st != KT_RACE_RACING || p.slot < 0)
    return st;
  cr_assert_eq(kt_race_events(r, &p), 0);
  fake_event *stop = p.stop;
  stop->recorded = 1;
  kt_race_end(r, &p, 1);
  if (complete) {
    const float ms = times(p.variant, sample++);
    stop->ready = ms >= 0;
    stop->lost = ms < 0;
    stop->ms = ms;
  }
  return st;
}

/* Calls until the race is no longer racing (at most 20); the last call's
 * variant (the winner, once decided), and how often each of variants 40 to
 * 43 ran while racing (ran: NULL or 4 counts). */
static int race_to_end(kt_race *r, int n, times_fn times, int *ran)
{
  int v = -1, calls = 0, st;
  while ((st = call(r, n, times, &v, 1)) == KT_RACE_RACING) {
    cr_assert(v >= 40 && v <= 43, "ran %d, not a candidate", v);
    if (ran)
      ran[v - 40]++;
    cr_assert_lt(++calls, 20, "the race does not end");
  }
  cr_expect_eq(st, KT_RACE_DECIDED);
  return v;
}

static float by_variant(int variant, int sample)
{
  (void)sample;
  return variant == 41 ? 1.0f : variant == 40 ? 2.0f : 3.0f;
}

Test(online, every_candidate_is_timed_three_times_and_the_fastest_wins)
{
  fake_timer f;
  kt_race *r = race_with(&f, 3);
  int ran[4] = {0}, v = race_to_end(r, 3, by_variant, ran);
  cr_expect_eq(v, 41, "the winner is the fastest candidate, not %d", v);
  for (int c = 0; c < 3; ++c)
    cr_expect_eq(ran[c], KT_RACE_SAMPLES, "candidate %d ran %d times", c, ran[c]);
  kt_race_pick p;
  cr_assert_eq(kt_race_peek(r, KEY, &p), KT_RACE_DECIDED);
  cr_expect_eq(p.variant, 41);
  cr_expect_float_eq(p.ms, 1.0f, 1e-6);
  cr_expect_eq(p.samples, 3 * KT_RACE_SAMPLES);
  cr_expect_eq(p.first, 40, "the model's pick is reported beside the winner");
  cr_expect_eq(f.destroyed, f.used, "a decided race gives its events back");
  /* Decided: later calls run the winner, untimed. */
  for (int i = 0; i < 5; ++i) {
    cr_expect_eq(call(r, 3, by_variant, &v, 1), KT_RACE_DECIDED);
    cr_expect_eq(v, 41);
  }
  kt_race_free(r);
}

/* A slow outlier (a kernel's first launch) does not lose a candidate the race. */
static float outlier(int variant, int sample)
{
  (void)sample;
  static int seen40;
  if (variant == 40)
    return seen40++ == 0 ? 9.0f : 1.5f;
  return 2.0f;
}

Test(online, the_least_of_a_candidates_times_counts)
{
  fake_timer f;
  kt_race *r = race_with(&f, 2);
  cr_expect_eq(race_to_end(r, 2, outlier, NULL), 40);
  kt_race_free(r);
}

Test(online, samples_in_flight_are_waited_for_and_never_block_a_call)
{
  fake_timer f;
  kt_race *r = race_with(&f, 4);
  int v;
  /* Nothing completes: KT_RACE_SLOTS samples go out, then calls run untimed. */
  for (int i = 0; i < KT_RACE_SLOTS; ++i)
    cr_assert_eq(call(r, 4, by_variant, &v, 0), KT_RACE_RACING);
  kt_race_pick p;
  cr_assert_eq(kt_race_begin(r, KEY, &p), KT_RACE_RACING);
  cr_expect_lt(p.slot, 0, "a fifth sample in flight");
  cr_expect_eq(p.variant, 40, "with no times yet, the model's pick runs");
  cr_expect_eq(p.samples, 0);
  /* Now they complete: the next call takes them. */
  for (int i = 0; i < 64; ++i)
    if (f.ev[i].recorded)
      f.ev[i].ready = 1, f.ev[i].ms = 5.0f;
  cr_assert_eq(kt_race_begin(r, KEY, &p), KT_RACE_RACING);
  cr_expect_eq(p.samples, KT_RACE_SLOTS);
  kt_race_end(r, &p, 0); /* not run after all: a lost sample */
  kt_race_free(r);
}

Test(online, an_unrecorded_sample_is_never_queried)
{
  fake_timer f;
  kt_race *r = race_with(&f, 2);
  kt_race_pick p, q;
  cr_assert_eq(kt_race_add(r, KEY, 2, VARIANTS, PREDICTED, &p), KT_RACE_RACING);
  cr_assert_geq(p.slot, 0);
  cr_assert_eq(kt_race_events(r, &p), 0);
  /* Another call before this one's events are recorded. */
  cr_assert_eq(kt_race_begin(r, KEY, &q), KT_RACE_RACING);
  for (int i = 0; i < 64; ++i)
    cr_expect_not(f.ev[i].queried_unrecorded, "event %d queried before it was recorded", i);
  cr_expect_eq(q.samples, 0);
  kt_race_free(r);
}

static float lose_42(int variant, int sample)
{
  (void)sample;
  return variant == 42 ? -1.0f : variant == 41 ? 3.0f : 2.5f;
}

Test(online, a_candidate_that_loses_two_samples_is_dropped)
{
  fake_timer f;
  kt_race *r = race_with(&f, 3);
  int ran[4] = {0};
  cr_expect_eq(race_to_end(r, 3, lose_42, ran), 40);
  cr_expect_eq(ran[2], 2, "the losing candidate ran %d times", ran[2]);
  kt_race_free(r);
}

/* Fast once, then lost twice: dropped, and no winner on its one time. */
static float fast_then_lost(int variant, int sample)
{
  (void)sample;
  static int seen42;
  if (variant == 42)
    return seen42++ == 0 ? 0.1f : -1.0f;
  return variant == 41 ? 3.0f : 2.5f;
}

Test(online, a_dropped_candidate_cannot_win)
{
  fake_timer f;
  kt_race *r = race_with(&f, 3);
  const int v = race_to_end(r, 3, fast_then_lost, NULL);
  cr_expect_eq(v, 40, "the winner is %d", v);
  kt_race_free(r);
}

static float lose_all(int variant, int sample)
{
  (void)variant, (void)sample;
  return -1.0f;
}

Test(online, with_no_time_taken_the_models_pick_wins)
{
  fake_timer f;
  kt_race *r = race_with(&f, 4);
  cr_expect_eq(race_to_end(r, 4, lose_all, NULL), 40);
  kt_race_pick p;
  cr_assert_eq(kt_race_peek(r, KEY, &p), KT_RACE_DECIDED);
  cr_expect(isinf(p.ms));
  kt_race_free(r);

  /* No events at all: every call runs untimed, the model's pick. */
  r = race_with(&f, 4);
  f.fail_create = 1;
  kt_race_pick q;
  cr_assert_eq(kt_race_add(r, KEY, 4, VARIANTS, PREDICTED, &q), KT_RACE_RACING);
  cr_expect_neq(kt_race_events(r, &q), 0);
  kt_race_end(r, &q, 0);
  for (int i = 0; i < 20; ++i) {
    cr_assert_eq(kt_race_begin(r, KEY, &q), KT_RACE_RACING + (i >= 7), "call %d", i);
    if (q.slot >= 0) {
      cr_expect_neq(kt_race_events(r, &q), 0);
      kt_race_end(r, &q, 0);
    }
  }
  cr_expect_eq(q.variant, 40);
  kt_race_free(r);
}

Test(online, one_candidate_is_decided_at_once)
{
  fake_timer f;
  kt_race *r = race_with(&f, 4);
  kt_race_pick p;
  cr_assert_eq(kt_race_add(r, KEY, 1, VARIANTS, PREDICTED, &p), KT_RACE_DECIDED);
  cr_expect_eq(p.variant, 40);
  cr_expect_lt(p.slot, 0);
  cr_expect_eq(f.used, 0, "no events for a race of one");
  kt_race_free(r);
}

Test(online, off_races_nothing_and_a_full_table_leaves_shapes_to_the_model)
{
  fake_timer f;
  kt_race *r = race_with(&f, 0);
  kt_race_pick p;
  cr_expect_eq(kt_race_begin(r, KEY, &p), KT_RACE_OFF);
  cr_expect_eq(kt_race_add(r, KEY, 2, VARIANTS, PREDICTED, &p), KT_RACE_OFF);
  cr_expect_eq(kt_race_set(r, 1), KT_OK, "1 is stored, and races nothing");
  cr_expect_eq(kt_race_candidates(r), 0);
  cr_expect_eq(kt_race_set(r, KT_RACE_MAX + 1), KT_ERR_BAD_OPTION);
  cr_expect_eq(kt_race_set(r, -1), KT_ERR_BAD_OPTION);
  cr_assert_eq(kt_race_set(r, 2), KT_OK);
  int added = 0;
  for (uint64_t k = 1; k <= KT_RACE_SHAPES; ++k)
    added += kt_race_add(r, k * 7919, 1, VARIANTS, PREDICTED, &p) == KT_RACE_DECIDED;
  cr_expect_eq(added, KT_RACE_SHAPES * 3 / 4, "%d shapes raced", added);
  cr_expect_eq(kt_race_begin(r, 999983ull * 65537, &p), KT_RACE_OFF, "a new shape is not asked for its candidates");
  cr_expect_eq(kt_race_add(r, 999983ull * 65537, 2, VARIANTS, PREDICTED, &p), KT_RACE_OFF);
  /* The shapes already in keep their winners. */
  cr_expect_eq(kt_race_begin(r, 7919, &p), KT_RACE_DECIDED);
  kt_race_free(r);
}

Test(online, ktune_online_values)
{
  int n = -1;
  cr_expect_eq(kt_race_parse(NULL, &n), KT_OK);
  cr_expect_eq(n, 0);
  cr_expect_eq(kt_race_parse("off", &n), KT_OK);
  cr_expect_eq(n, 0);
  cr_expect_eq(kt_race_parse("on", &n), KT_OK);
  cr_expect_eq(n, KT_RACE_DEFAULT);
  cr_expect_eq(kt_race_parse("6", &n), KT_OK);
  cr_expect_eq(n, 6);
  const char *bad[] = {"1", "9", "-2", "4x", "yes", " 4"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
    cr_expect_eq(kt_race_parse(bad[i], &n), KT_ERR_BAD_OPTION, "\"%s\" taken", bad[i]);
}

Test(online, kt_online_checks_its_arguments)
{
  kt_context *ctx = kt_test_open_no_db();
  cr_expect_eq(kt_online(NULL, 4), KT_ERR_BAD_CONTEXT);
  cr_expect_eq(kt_online(ctx, 1), KT_ERR_BAD_OPTION);
  cr_expect_eq(kt_online(ctx, KT_RACE_MAX + 1), KT_ERR_BAD_OPTION);
  cr_expect_eq(kt_online(ctx, -3), KT_ERR_BAD_OPTION);
  cr_expect_eq(kt_online(ctx, 4), KT_OK);
  cr_expect_eq(kt_online(ctx, 0), KT_OK);
  kt_close(ctx);
  cr_expect_eq(kt_online(ctx, 4), KT_ERR_BAD_CONTEXT, "a closed context");
  kt_test_rmdir();
}
