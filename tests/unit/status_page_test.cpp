// The status page is self-contained: no asset from anywhere else, relative API paths only, worker
// text never inserted as markup. (Its rendering is checked in Chromium by unit_status_http.)
#include <gtest/gtest.h>

#include <string>

#include "launcher/observe/status_page.hpp"

namespace ddprun::launcher {
namespace {

TEST(StatusPage, NoExternalAsset) {
  const std::string page(status_page_html());
  for (const char* external : {"http://", "https://", "src=", "<link", "@import", "url(", "//cdn"}) {
    EXPECT_EQ(page.find(external), std::string::npos) << "the page names " << external;
  }
}

TEST(StatusPage, ReadsTheApiByRelativePaths) {
  const std::string page(status_page_html());
  EXPECT_NE(page.find("api(\"api/status\")"), std::string::npos);
  EXPECT_NE(page.find("api(\"api/stacks\")"), std::string::npos);
  EXPECT_EQ(page.find("\"/api/"), std::string::npos) << "an absolute path breaks behind a path prefix";
  EXPECT_NE(page.find("setInterval(poll, 1000)"), std::string::npos);
}

TEST(StatusPage, NeverUsesMarkupForData) {
  const std::string page(status_page_html());
  EXPECT_EQ(page.find("innerHTML"), std::string::npos);
  EXPECT_EQ(page.find("outerHTML"), std::string::npos);
  EXPECT_EQ(page.find("document.write"), std::string::npos);
  EXPECT_EQ(page.find("eval("), std::string::npos);
}

TEST(StatusPage, IsOneDocument) {
  const std::string page(status_page_html());
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  EXPECT_NE(page.find("<meta charset=\"utf-8\">"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher
