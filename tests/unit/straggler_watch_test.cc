#include <catch2/catch.hpp>

#include "common/straggler_watch.h"

using mxrun::StragglerWatch;

TEST_CASE("stragglers: named after the set number of slow steps, against the others' median",
          "[straggler]") {
  StragglerWatch watch({1.5, 5});
  int named = 0;
  for (long long step = 1; step <= 10; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      // Rank 2 takes 2x as long; rank 3 is 1.4x: below the factor, never named.
      const double seconds = rank == 2 ? 0.2 : rank == 3 ? 0.14 : 0.1;
      if (auto news = watch.Report(rank, step, seconds)) {
        CHECK(news->rank == 2);
        CHECK(news->straggling);
        CHECK(news->steps == 5);
        CHECK(news->others_median == Approx(0.1));
        CHECK(mxrun::DescribeStraggler(*news) ==
              "rank 2 is a straggler: 0.200 s a step, 2.0x the other ranks' median (0.100 s), "
              "for 5 steps");
        ++named;
      }
    }
  }
  CHECK(named == 1);  // once, not at every step after
  CHECK(watch.Stragglers() == std::vector<int>{2});
  // It catches up: no longer a straggler once as many steps (5) were fast, said once.
  for (long long step = 11; step <= 14; ++step) CHECK_FALSE(watch.Report(2, step, 0.1));
  CHECK(watch.Stragglers() == std::vector<int>{2});
  auto back = watch.Report(2, 15, 0.1);
  REQUIRE(back.has_value());
  CHECK_FALSE(back->straggling);
  CHECK(back->steps == 5);
  CHECK(mxrun::DescribeStraggler(*back) ==
        "rank 2 is no longer a straggler: 0.100 s a step, the other ranks' median 0.100 s, for "
        "5 steps");
  CHECK(watch.Stragglers().empty());
  CHECK_FALSE(watch.Report(2, 16, 0.1));
}

TEST_CASE("stragglers: a fast report among slow ones neither clears a straggler nor names it anew",
          "[straggler]") {
  // Reports read in a burst by a starved agent: one of the slow rank's steps looks fast.
  StragglerWatch watch({1.5, 5});
  int named = 0;
  int cleared = 0;
  for (long long step = 1; step <= 40; ++step) {
    for (int rank = 0; rank < 3; ++rank) {
      const double seconds = rank != 1 ? 0.05 : step % 7 == 0 ? 0.05 : 0.15;
      if (auto news = watch.Report(rank, step, seconds)) {
        CHECK(news->rank == 1);
        (news->straggling ? named : cleared) += 1;
      }
    }
  }
  CHECK(named == 1);
  CHECK(cleared == 0);
  CHECK(watch.Stragglers() == std::vector<int>{1});
}

TEST_CASE(
    "stragglers: a fast step breaks the run, a report of several steps counts for all, "
    "two ranks suffice",
    "[straggler]") {
  StragglerWatch watch({1.5, 10});
  watch.Report(0, 1, 0.1);
  CHECK_FALSE(watch.Report(1, 4, 0.5).has_value());   // 1 slow step (the first report)
  CHECK_FALSE(watch.Report(1, 8, 0.1).has_value());   // fast again: the run starts over
  CHECK_FALSE(watch.Report(1, 12, 0.5).has_value());  // 4 slow steps
  CHECK_FALSE(watch.Report(1, 14, -1).has_value());   // no time: not judged
  auto news = watch.Report(1, 20, 0.5);               // 6 more: 10 (14 -> 20)
  REQUIRE(news.has_value());
  CHECK(news->steps == 10);
  watch.Reset();
  CHECK(watch.Stragglers().empty());
  CHECK_FALSE(watch.Report(1, 21, 9.0).has_value());  // alone after a reset: nobody to compare
}

TEST_CASE("stragglers: Record and Judge name the same ranks as Report, judging all at once",
          "[straggler]") {
  // 64 ranks as a master sees them: reports of 4 steps at a time, judged once per batch. Rank 17
  // is 3x slower, rank 40 only 1.4x; every rank of the batch is judged against the same medians.
  StragglerWatch batch({1.5, 8});
  StragglerWatch one_by_one({1.5, 8});
  std::vector<int> named;
  for (long long step = 4; step <= 16; step += 4) {
    for (int rank = 0; rank < 64; ++rank) {
      const double seconds = rank == 17 ? 0.3 : rank == 40 ? 0.14 : 0.1 + 0.0001 * (rank % 3);
      batch.Record(rank, step, seconds);
      one_by_one.Report(rank, step, seconds);
    }
    for (const mxrun::StragglerNews& news : batch.Judge()) {
      CHECK(news.straggling);
      CHECK(news.steps == 9);  // the first report counts 1 step, then 4 a report
      CHECK(news.others_median == Approx(0.1001).epsilon(0.01));
      named.push_back(news.rank);
    }
  }
  CHECK(named == std::vector<int>{17});
  CHECK(batch.Stragglers() == one_by_one.Stragglers());
  CHECK(batch.IsStraggler(17));
  CHECK_FALSE(batch.IsStraggler(40));
  CHECK(batch.Judge().empty());  // nothing new since the last judgement
  batch.Forget(17);
  CHECK(batch.Stragglers().empty());
}

TEST_CASE("stragglers: the median leaves out the judged rank, whatever ties there are",
          "[straggler]") {
  // Others of rank 0 (0.3): {0.1, 0.1, 0.3} -> median 0.1; it is named. Rank 3 (0.3) the same.
  StragglerWatch watch({1.5, 1});
  watch.Record(0, 1, 0.3);
  watch.Record(1, 1, 0.1);
  watch.Record(2, 1, 0.1);
  watch.Record(3, 1, 0.3);
  const std::vector<mxrun::StragglerNews> news = watch.Judge();
  REQUIRE(news.size() == 2);
  CHECK(news[0].rank == 0);
  CHECK(news[0].others_median == Approx(0.1));
  CHECK(news[1].rank == 3);
  CHECK(news[1].others_median == Approx(0.1));
}

TEST_CASE(
    "stragglers: under synchronous data parallel the ranks' own work names the slow one, "
    "never compared with a step time",
    "[straggler]") {
  StragglerWatch watch({1.5, 5});
  std::vector<mxrun::StragglerNews> said;
  for (long long step = 1; step <= 8; ++step) {
    for (int rank = 0; rank < 3; ++rank) {
      // Every rank's step takes the slowest rank's 0.3 s (the all-reduce waits for it); rank 1's
      // own work is 0.24 s, the others' 0.08 s.
      if (auto news = watch.Report(rank, step, 0.3, rank == 1 ? 0.24 : 0.08)) said.push_back(*news);
    }
  }
  REQUIRE(said.size() == 1);
  CHECK(said[0].rank == 1);
  CHECK(said[0].busy);
  CHECK(mxrun::DescribeStraggler(said[0]) ==
        "rank 1 is a straggler: 0.240 s of its own work (input and forward) a step, 3.0x the "
        "other ranks' median (0.080 s), for 5 steps");

  // A rank whose reports carry no busy time (its model not found) is judged only against ranks
  // that report step times too: its 0.3 s steps are not 3.75x the others' 0.08 s of own work.
  StragglerWatch mixed({1.5, 3});
  for (long long step = 1; step <= 6; ++step) {
    CHECK_FALSE(mixed.Report(0, step, 0.3, 0.08).has_value());
    CHECK_FALSE(mixed.Report(1, step, 0.3, 0.08).has_value());
    CHECK_FALSE(mixed.Report(2, step, 0.3).has_value());
  }
  CHECK(mixed.Stragglers().empty());
  // Its first report with a busy time starts its count of slow steps again.
  StragglerWatch switching({1.5, 3});
  for (long long step = 1; step <= 2; ++step) {
    switching.Report(0, step, 0.1, 0.05);
    switching.Report(1, step, 0.3);  // slow by step time, but nobody to compare it with
  }
  CHECK_FALSE(switching.Report(1, 3, 0.3, 0.2).has_value());  // 1 slow step of own work
  CHECK_FALSE(switching.Report(1, 4, 0.3, 0.2).has_value());
  CHECK(switching.Report(1, 5, 0.3, 0.2).has_value());  // the third
}
